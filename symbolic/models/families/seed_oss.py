"""Seed-OSS (HF ``model_type`` seed_oss), as ``modeling_seed_oss.py`` of transformers 5.24.0 builds it.

SeedOssDecoderLayer (:229-270): Llama's — pre-RMSNorm, sequential; SeedOssAttention (:157-226):
GQA of ``head_dim`` (128 by default, not h/a: Seed-OSS-36B has 80 heads of 128 over h = 5120),
``attention_bias`` on Q, K and V (:170-178), ``attention_out_bias`` on O (:179-181), dropout on the
probabilities (``attention_dropout``, :217) and on O's output (``residual_dropout``, :224);
SeedOssMLP (:69-84): gated with ``mlp_bias``, dropout on down's output (``residual_dropout``, :83).
Both dropouts default to 0.1 (configuration_seed_oss.py:80-81) and run in training
(``training=self.training``): each residual dropout keeps its mask (s, b, h; CPU: a bf16 noise
tensor, CUDA: a bool mask), the attention dropout as :func:`~..architectures.parts.attention_core`
states per kernel.
"""
from ..config import Recipe
from .base import Read, attention_dropout_note, dropout_rate, source

MODEL_TYPE = "seed_oss"
TITLE = "Seed-OSS"
SOURCE = source(MODEL_TYPE)

#: configuration_seed_oss.py's SeedOssConfig defaults of the fields read (:61-83)
DEFAULTS = {"intermediate_size": 27648, "max_position_embeddings": 524288, "num_key_value_heads": 8,
            "head_dim": 128, "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": True,
            "attention_out_bias": False, "attention_dropout": 0.1, "residual_dropout": 0.1, "mlp_bias": False}


def read(fields) -> Read:
    rate = dropout_rate(fields, "attention_dropout")
    residual = dropout_rate(fields, "residual_dropout")
    recipe = Recipe(MODEL_TYPE, qkv_bias=fields.flag("attention_bias"), o_bias=fields.flag("attention_out_bias"),
                    activation=fields.activation(), mlp_bias=fields.flag("mlp_bias"), block_dropout=residual > 0,
                    attention_dropout=rate > 0)
    kv_heads = fields.count("num_key_value_heads", fields.heads)
    head_dim = fields.count("head_dim")  # SeedOssAttention reads config.head_dim as it is (:162)
    seq = fields.count("max_position_embeddings")
    notes = attention_dropout_note(recipe, rate, fields, kv_heads, head_dim, seq)
    if residual:
        notes += (f"residual_dropout = {residual:g} is applied in training on the attention's and the MLP's outputs "
                  "before each residual add: each keeps its mask, counted (1 byte per element on CUDA's bool mask; "
                  "CPU's dropout keeps a bf16 noise tensor, 2 bytes)",)
    return Read(recipe, ffn=fields.count("intermediate_size"), kv_heads=kv_heads, seq=seq, head_dim=head_dim,
                notes=notes)
