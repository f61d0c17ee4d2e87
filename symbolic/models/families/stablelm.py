"""StableLM (HF ``model_type`` stablelm), as ``modeling_stablelm.py`` of transformers 5.24.0 builds it.

StableLmDecoderLayer: ``input_layernorm`` (LayerNorm) and, sequential by default, a
``post_attention_layernorm``; with ``use_parallel_residual`` one norm feeds both blocks,
x + attn(ln(x)) + mlp(ln(x)). StableLmAttention: heads of width h/a (no head_dim), Q, K, V
with ``use_qkv_bias``, O without bias, rotary on the first ``partial_rotary_factor``·h/a
features (0.25 by default), Q and K rebuilt by ``torch.cat``; StableLmMLP: gated (gate, up,
down, no bias); ``hidden_dropout`` 0 by default; final LayerNorm; lm_head without bias.
"""
from ..config import Recipe
from .base import Read, rotary_factor, source

MODEL_TYPE = "stablelm"
TITLE = "StableLM"
SOURCE = source(MODEL_TYPE)

#: configuration_stablelm.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 6912, "max_position_embeddings": 4096, "num_key_value_heads": 32,
            "hidden_act": "silu", "tie_word_embeddings": False, "use_qkv_bias": False, "qk_layernorm": False,
            "use_parallel_residual": False}


def read(fields) -> Read:
    qk_layernorm = fields.flag("qk_layernorm")  # StableLmLayerNormPerHead: a LayerNorm per head, split and cat
    rotary_factor(fields, 0.25)
    bias = fields.flag("use_qkv_bias")
    recipe = Recipe(MODEL_TYPE, norm="layernorm", qkv_bias=bias,
                    residual="parallel_shared" if fields.flag("use_parallel_residual") else "sequential",
                    activation=fields.activation(), rotary_cat=True,
                    qk_norm="head_layernorm_each" if qk_layernorm else "none")
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"))  # StableLmAttention: head_dim = h // a, always
