"""Granite (HF ``model_type`` granite), as ``modeling_granite.py`` of transformers 5.24.0 builds it.

The Llama layer (pre-RMSNorm, GQA, full rotary, SwiGLU, ``attention_bias`` on Q, K, V, O and
``mlp_bias``) with four scalar multipliers: ``embedding_multiplier`` on the embeddings,
``residual_multiplier`` on each block's output before its residual add, ``attention_multiplier``
as the attention's scaling and ``logits_scaling`` dividing the logits.
"""
from ..config import Recipe
from .base import Read, multiplier_note, source

MODEL_TYPE = "granite"
TITLE = "Granite"
SOURCE = source(MODEL_TYPE)

MULTIPLIERS = ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling")

#: configuration_granite.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 11008, "max_position_embeddings": 2048, "num_key_value_heads": None,
            "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
            "embedding_multiplier": 1.0, "residual_multiplier": 1.0, "attention_multiplier": 1.0,
            "logits_scaling": 1.0}


def read(fields) -> Read:
    bias = fields.flag("attention_bias")
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, mlp_bias=fields.flag("mlp_bias"),
                    activation=fields.activation())
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=fields.count("head_dim"),
                notes=multiplier_note(fields, MULTIPLIERS))
