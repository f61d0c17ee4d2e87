"""Nemotron / Minitron (HF ``model_type`` nemotron), as ``modeling_nemotron.py`` of transformers 5.24.0.

NemotronDecoderLayer: pre-norm, sequential, with NemotronLayerNorm1P (``F.layer_norm`` with
weight + 1 and a bias); NemotronAttention: GQA of ``head_dim`` (h/a when null), ``attention_bias``
on Q, K, V, O, rotary on the first ``partial_rotary_factor``·head_dim features (0.5 by default)
and ``torch.cat`` of the rotated and passed parts; NemotronMLP: up → ``hidden_act`` (relu2,
relu then square) → down, ``mlp_bias``; a final LayerNorm1P; lm_head without bias.
"""
from ..config import Recipe
from .base import Read, rotary_factor, source

MODEL_TYPE = "nemotron"
TITLE = "Nemotron / Minitron"
SOURCE = source(MODEL_TYPE)

#: configuration_nemotron.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 24576, "max_position_embeddings": 4096, "num_key_value_heads": None,
            "head_dim": None, "hidden_act": "relu2", "tie_word_embeddings": False, "attention_bias": False,
            "mlp_bias": False}


def read(fields) -> Read:
    rotary_factor(fields, 0.5)
    bias = fields.flag("attention_bias")
    recipe = Recipe(MODEL_TYPE, norm="layernorm_1p", qkv_bias=bias, o_bias=bias, mlp="plain",
                    activation=fields.activation(known=("relu2",)), mlp_bias=fields.flag("mlp_bias"),
                    rotary_cat=True)
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=fields.count("head_dim"))
