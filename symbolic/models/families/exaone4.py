"""EXAONE 4.0 (HF ``model_type`` exaone4), as ``modeling_exaone4.py`` of transformers 5.24.0 builds it.

Exaone4DecoderLayer: the norms on the block outputs before the residual add (x + norm(attn(x)),
then h + norm(mlp(h))), as OLMo-2, in Llama's RMSNorm (Exaone4RMSNorm: x·rstd cast back, then ×
weight); Exaone4Attention: GQA without biases, a per-head RMSNorm on Q and K (q_norm, k_norm of
head_dim, as Qwen3), the rotary on the sliding layers only when ``sliding_window`` is set ("global
NoPE": ``if self.sliding_window is None or self.is_sliding``) and on every layer when it is not;
``sliding_window`` on the layers ``layer_types`` names "sliding_attention"; the Llama MLP.
configuration_exaone4.py: without ``layer_types``, ``sliding_window_pattern`` (an int, 4) makes
every fourth layer full; a pattern string ("LLLG") is read only through ``layer_types``.
"""
from .. import windows
from ..config import Recipe
from .base import Read, source

MODEL_TYPE = "exaone4"
TITLE = "EXAONE 4.0"
SOURCE = source(MODEL_TYPE)

#: configuration_exaone4.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 16384, "max_position_embeddings": 2048, "num_key_value_heads": 32,
            "hidden_act": "silu", "tie_word_embeddings": False, "sliding_window": 4096, "sliding_window_pattern": 4}


def _sliding(i, value):
    return (i + 1) % value("sliding_window_pattern") != 0


#: layer_types read (modeling_exaone4.py Exaone4Attention); absent, the int sliding_window_pattern
WINDOWS = windows.Rule(layer_types=True, default=_sliding)


def read(fields) -> Read:
    if fields.value("sliding_window") is None and fields.raw.get("layer_types") is None:
        # configuration_exaone4.py __post_init__: no window sets sliding_window_pattern = 0, then (i + 1) % 0
        fields.refuse("sliding_window", None, "EXAONE 4.0 without a window only with its layer_types given "
                      "(transformers 5.24.0's Exaone4Config fails on (i + 1) % 0 otherwise); give layer_types, "
                      "e.g. every layer \"full_attention\"")
    pattern = fields.value("sliding_window_pattern")
    if fields.raw.get("layer_types") is None and (isinstance(pattern, bool) or not isinstance(pattern, int)
                                                  or pattern <= 0):
        # configuration_exaone4.py: (i + 1) % sliding_window_pattern — a string ("LLLG") fails there
        fields.refuse("sliding_window_pattern", pattern, "EXAONE 4.0's layer kinds from layer_types, or from an "
                      "int sliding_window_pattern (transformers 5.24.0 cannot build a string pattern alone); "
                      "give layer_types")
    recipe = Recipe(MODEL_TYPE, placement="post", qk_norm="head", activation=fields.activation())
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=fields.count("head_dim"))
