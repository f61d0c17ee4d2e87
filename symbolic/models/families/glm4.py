"""GLM-4 (HF ``model_type`` glm4), as ``modeling_glm4.py`` of transformers 5.24.0 builds it.

Glm4DecoderLayer: four RMSNorms, x + post_self_attn(attn(input(x))), then
h + post_mlp(mlp(post_attention(h))) (the sandwich of Gemma-2, in Llama's RMSNorm);
Glm4Attention: GQA of ``head_dim`` (128 by default), ``attention_bias`` on Q, K and V (O
without), interleaved rotary on the first ``partial_rotary_factor``·head_dim features (0.5 by
default) with cos and sin rebuilt by ``repeat_interleave`` in every layer, then ``torch.cat``;
Glm4MLP: one gate|up matrix (``gate_up_proj``), SiLU, down, no biases.
"""
from ..config import Recipe
from .base import Read, rotary_factor, source

MODEL_TYPE = "glm4"
TITLE = "GLM-4"
SOURCE = source(MODEL_TYPE)

#: configuration_glm4.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 13696, "max_position_embeddings": 131072, "num_key_value_heads": 2,
            "head_dim": 128, "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": True}


def read(fields) -> Read:
    head_dim = fields.count("head_dim")
    width = head_dim or fields.hidden // fields.heads
    # Glm4RotaryEmbedding: dim = int(head_dim·factor), inv_freq over arange(0, dim, 2), emb = cat(freqs, freqs);
    # apply_rotary_pos_emb takes cos[..., :d/2].repeat_interleave(2): 2·ceil(dim/2) features rotated
    dim = int(width * rotary_factor(fields, 0.5))
    rotated = 2 * ((dim + 1) // 2)
    recipe = Recipe(MODEL_TYPE, placement="sandwich", qkv_bias=fields.flag("attention_bias"),
                    activation=fields.activation(), fused_gate_up=True, rotary_cat=True, rotary_tables=2)
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=head_dim, dims={"d_r": rotated})
