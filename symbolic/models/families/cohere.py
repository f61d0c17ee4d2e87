"""Command-R (HF ``model_type`` cohere), as ``modeling_cohere.py`` of transformers 5.24.0 builds it.

CohereDecoderLayer: one CohereLayerNorm (in fp32, weight only, no bias) whose output feeds both
blocks, x + attn(ln(x)) + mlp(ln(x)); CohereAttention: GQA, ``attention_bias`` on Q, K, V, O,
interleaved rotary computed in fp32 (``q.float()``) and cast back; the Llama MLP (gate, up,
down, SiLU); a final CohereLayerNorm; lm_head tied by default, its logits multiplied by
``logit_scale``. ``use_qk_norm`` (Command R+): a CohereLayerNorm of shape (heads, head_dim) on Q
and one of (kv heads, head_dim) on K, per head, before the rotary.
"""
from ..config import Recipe
from .base import Read, multiplier_note, source

MODEL_TYPE = "cohere"
TITLE = "Command-R (Cohere)"
SOURCE = source(MODEL_TYPE)

#: configuration_cohere.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 22528, "max_position_embeddings": 8192, "num_key_value_heads": None,
            "hidden_act": "silu", "tie_word_embeddings": True, "attention_bias": False, "use_qk_norm": False,
            "logit_scale": 0.0625}


def read(fields) -> Read:
    bias = fields.flag("attention_bias")
    # use_qk_norm (Command R+): CohereAttention's q_norm, k_norm, CohereLayerNorm((heads, head_dim)) over each
    # head's width in fp32, no bias (modeling_cohere.py:228-236), on Q and K before the transpose and rotary (:254)
    recipe = Recipe(MODEL_TYPE, norm="layernorm_fp32", residual="parallel_shared", qkv_bias=bias, o_bias=bias,
                    activation=fields.activation(),
                    qk_norm="head_layernorm_fp32_each" if fields.flag("use_qk_norm") else "none")
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=fields.count("head_dim"),
                notes=multiplier_note(fields, ("logit_scale",)))
