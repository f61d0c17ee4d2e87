"""Phi-1/1.5/2 (HF ``model_type`` phi), as ``modeling_phi.py`` of transformers 5.24.0 builds it.

PhiDecoderLayer: one LayerNorm whose output feeds both blocks, x + attn(ln(x)) + mlp(ln(x))
(``resid_dropout``, 0 by default, on each); PhiAttention: Q, K, V and ``dense`` with biases,
rotary embedding on the first ``partial_rotary_factor``·head_dim features (0.5 by default),
Q and K rebuilt by ``torch.cat``; PhiMLP: fc1 → ``hidden_act`` (gelu_new) → fc2 with biases;
a final LayerNorm and ``lm_head`` with a bias (``nn.Linear(h, V, bias=True)``).
"""
from ..config import Recipe
from .base import Read, rotary_factor, source

MODEL_TYPE = "phi"
TITLE = "Phi-2"
SOURCE = source(MODEL_TYPE)

#: configuration_phi.py's defaults of the fields read (num_key_value_heads None: = heads)
DEFAULTS = {"intermediate_size": 8192, "max_position_embeddings": 2048, "num_key_value_heads": None,
            "hidden_act": "gelu_new", "tie_word_embeddings": False, "qk_layernorm": False}


def read(fields) -> Read:
    qk_layernorm = fields.flag("qk_layernorm")  # one LayerNorm of width h/a over each head of Q, one of K
    if qk_layernorm and fields.value("head_dim") not in (None, fields.hidden // fields.heads):
        # q_layernorm is LayerNorm(hidden_size // num_attention_heads): HF's own layer only runs at that width
        fields.refuse("head_dim", fields.value("head_dim"), "Phi's qk_layernorm with heads of width "
                      "hidden_size/num_attention_heads")
    rotary_factor(fields, 0.5)  # any factor: the slices and torch.cat keep the same storages
    recipe = Recipe(MODEL_TYPE, norm="layernorm", residual="parallel_shared", qkv_bias=True, o_bias=True,
                    mlp="plain", activation=fields.activation(), mlp_bias=True, rotary_cat=True, logits_bias=True,
                    qk_norm="head_layernorm" if qk_layernorm else "none")
    return Read(recipe, ffn=fields.count("intermediate_size"), kv_heads=fields.count("num_key_value_heads",
                                                                                       fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=fields.count("head_dim"))
