"""StarCoder2 (HF ``model_type`` starcoder2), as ``modeling_starcoder2.py`` of transformers 5.24.0 builds it.

Starcoder2DecoderLayer: pre-LayerNorm (``norm_epsilon``), sequential residual; Starcoder2Attention:
GQA with ``use_bias`` on Q, K, V and O, full rotary; Starcoder2MLP: c_fc → ``hidden_act``
(gelu_pytorch_tanh) → c_proj with ``use_bias``; ``residual_dropout`` (0 by default) on each block;
a final LayerNorm; lm_head without bias, tied by default.
"""
from .. import windows
from ..config import Recipe
from .base import Read, source

MODEL_TYPE = "starcoder2"
TITLE = "StarCoder2"
SOURCE = source(MODEL_TYPE)

#: configuration_starcoder2.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 12288, "max_position_embeddings": 4096, "num_key_value_heads": 2,
            "hidden_act": "gelu_pytorch_tanh", "tie_word_embeddings": True, "use_bias": True,
            "sliding_window": None}

#: Starcoder2Attention passes config.sliding_window in every layer (modeling_starcoder2.py:193)
WINDOWS = windows.Rule()


def read(fields) -> Read:
    bias = fields.flag("use_bias")
    recipe = Recipe(MODEL_TYPE, norm="layernorm", qkv_bias=bias, o_bias=bias, mlp="plain",
                    activation=fields.activation(), mlp_bias=bias)
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=fields.count("head_dim"))
