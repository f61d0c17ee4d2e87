"""Ministral (HF ``model_type`` ministral), as ``modeling_ministral.py`` of transformers 5.24.0 builds it.

MinistralDecoderLayer (modeling_ministral.py:221-263): Llama's — pre-RMSNorm, sequential residual;
MinistralAttention (:137-198): GQA with ``head_dim``, no biases, full rotary, and
``sliding_window`` on the layers ``layer_types`` names "sliding_attention" (:142, :155);
MinistralMLP (:50-64): gate, up, down, ``hidden_act``; a final RMSNorm; lm_head untied by default.
configuration_ministral.py:91-94: without ``layer_types`` every layer is windowed when
``sliding_window`` is set.
"""
from .. import windows
from ..config import Recipe
from .base import Read, source

MODEL_TYPE = "ministral"
TITLE = "Ministral"
SOURCE = source(MODEL_TYPE)

#: configuration_ministral.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 14336, "max_position_embeddings": 131072, "num_key_value_heads": 8,
            "head_dim": None, "hidden_act": "silu", "tie_word_embeddings": False, "sliding_window": 4096}

#: layer_types read (modeling_ministral.py:142); absent, every layer sliding (configuration_ministral.py:91-94)
WINDOWS = windows.Rule(layer_types=True, default=lambda i, value: True)


def read(fields) -> Read:
    head_dim = fields.count("head_dim")
    if head_dim is None:  # MinistralAttention: getattr(config, "head_dim", ...) is the config's None (:145-147)
        fields.refuse("head_dim", None, "Ministral with its head_dim given: transformers 5.24.0's "
                      "MinistralAttention reads config.head_dim, None unless the file sets it, and fails "
                      f"(None ** -0.5); give head_dim (h/a = {fields.hidden // fields.heads})")
    recipe = Recipe(MODEL_TYPE, activation=fields.activation())
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=head_dim)
