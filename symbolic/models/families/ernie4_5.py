"""ERNIE 4.5 dense (HF ``model_type`` ernie4_5), as ``modeling_ernie4_5.py`` of transformers 5.24.0 builds it.

Ernie4_5DecoderLayer (:267-): Llama's — pre-RMSNorm, sequential; Ernie4_5Attention (:185-244): GQA of
``head_dim`` (128 by default; h/a when null, configuration_ernie4_5.py's __post_init__), ``use_bias``
on Q, K, V and O (:199-202), no attention dropout (0.0, hard-coded); Ernie4_5MLP (:90-104): gated
with ``use_bias``; tied embeddings by default (configuration_ernie4_5.py:77). Its rotary
(apply_rotary_pos_emb, :151-182) is GLM's interleaved form over the whole head, in fp32: the model's
cos and sin stay fp32 (:79-88), each layer rebuilds them by ``repeat_interleave`` (:176-177) —
(s, d_h) fp32 each, kept by the rotary multiplies — and rotates Q and K in fp32 before casting back.
"""
from ..config import Recipe
from .base import Read, source

MODEL_TYPE = "ernie4_5"
TITLE = "ERNIE 4.5 (dense)"
SOURCE = source(MODEL_TYPE)

#: configuration_ernie4_5.py's Ernie4_5Config defaults of the fields read
DEFAULTS = {"intermediate_size": 3072, "max_position_embeddings": 131072, "num_key_value_heads": 2,
            "head_dim": 128, "hidden_act": "silu", "tie_word_embeddings": True, "use_bias": False}


def read(fields) -> Read:
    bias = fields.flag("use_bias")
    head_dim = fields.count("head_dim")
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, activation=fields.activation(), mlp_bias=bias,
                    rotary_tables=2, rotary_fp32=True)
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=head_dim,
                dims={"d_r": head_dim or fields.hidden // fields.heads})
