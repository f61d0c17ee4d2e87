"""OLMo-3 (HF ``model_type`` olmo3), as ``modeling_olmo3.py`` of transformers 5.24.0 builds it.

Olmo3DecoderLayer: OLMo-2's — the norms on the block outputs before the residual add (x +
norm(attn(x)), then h + norm(mlp(h))), Olmo3RMSNorm computed and multiplied by its weight in fp32,
cast back; Olmo3Attention: ``attention_bias`` on Q, K, V, O, an RMSNorm over all query features
(a·d_h) and over all key features (g·d_h) before the rotary (modeling_olmo3.py:140-215), and
``sliding_window`` on the layers ``layer_types`` names "sliding_attention" (:164-165); the
rotary tables per layer type are built once per model (Olmo3RotaryEmbedding, :272-333), not in a
layer. configuration_olmo3.py:92-95: without ``layer_types``, three sliding layers then one full.
"""
from .. import windows
from ..config import Recipe
from .base import Read, source

MODEL_TYPE = "olmo3"
TITLE = "OLMo-3"
SOURCE = source(MODEL_TYPE)

#: configuration_olmo3.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 11008, "max_position_embeddings": 2048, "num_key_value_heads": None,
            "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "sliding_window": 4096}

#: layer_types read (modeling_olmo3.py:164); absent, every fourth layer full (configuration_olmo3.py:92-95)
WINDOWS = windows.Rule(layer_types=True, default=lambda i, value: (i + 1) % 4 != 0)


def read(fields) -> Read:
    bias = fields.flag("attention_bias")
    recipe = Recipe(MODEL_TYPE, norm="rmsnorm_fp32", placement="post", qk_norm="full", qkv_bias=bias, o_bias=bias,
                    activation=fields.activation())
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=fields.count("head_dim"))
