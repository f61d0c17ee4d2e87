"""Command R7B / Command A (HF ``model_type`` cohere2), as ``modeling_cohere2.py`` of transformers 5.24.0
builds it.

Cohere2DecoderLayer (modeling_cohere2.py): Cohere's parallel layer — one Cohere2LayerNorm (fp32,
weight only) whose output feeds both blocks, x + attn(ln(x)) + mlp(ln(x)); Cohere2Attention: GQA,
``attention_bias`` on Q, K, V, O, no QK-norm; ``sliding_window`` on the layers ``layer_types``
names "sliding_attention", and the interleaved rotary (in fp32, cast back) on those layers only:
the full-attention layers have no positions (``if self.sliding_window is not None``); the Llama
MLP; a final Cohere2LayerNorm; lm_head tied by default, logits × ``logit_scale``.
configuration_cohere2.py: ``head_dim`` is hidden_size // num_attention_heads unless the file gives
one (its ``__post_init__`` sets h/a, the file's value is set after it), and without ``layer_types``
the Hub's ``sliding_window_pattern`` (4) gives three sliding layers then one full.
"""
from .. import windows
from ..config import Recipe
from .base import Read, multiplier_note, source

MODEL_TYPE = "cohere2"
TITLE = "Command R7B / Command A (Cohere 2)"
SOURCE = source(MODEL_TYPE)

#: configuration_cohere2.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 22528, "max_position_embeddings": 8192, "num_key_value_heads": None,
            "hidden_act": "silu", "tie_word_embeddings": True, "attention_bias": False, "logit_scale": 0.0625,
            "sliding_window": 4096}

#: layer_types read (modeling_cohere2.py Cohere2Attention); absent, sliding_window_pattern (configuration_cohere2.py)
WINDOWS = windows.Rule(layer_types=True,
                       default=lambda i, value: (i + 1) % (value("sliding_window_pattern") or 4) != 0)


def read(fields) -> Read:
    bias = fields.flag("attention_bias")
    recipe = Recipe(MODEL_TYPE, norm="layernorm_fp32", residual="parallel_shared", qkv_bias=bias, o_bias=bias,
                    activation=fields.activation())
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=fields.count("head_dim"),
                notes=multiplier_note(fields, ("logit_scale",)))
