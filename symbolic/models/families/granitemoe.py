"""GraniteMoE (HF ``model_type`` granitemoe), as ``modeling_granitemoe.py`` of transformers 5.24.0 builds it.

Mixtral's layer with Granite's four scalar multipliers (``embedding_multiplier``,
``residual_multiplier``, ``attention_multiplier``, ``logits_scaling``) and ``attention_bias`` on Q,
K, V, O. GraniteMoeTopKRouter: logits cast to fp32, top-k of the logits, then a softmax over those
k, cast back to bf16; GraniteMoeExperts: the eager experts loop of width ``intermediate_size``.
"""
from ..config import Recipe
from .base import Read, expert_counts, multiplier_note, source

MODEL_TYPE = "granitemoe"
TITLE = "GraniteMoE"
SOURCE = source(MODEL_TYPE)
EXPERTS = "num_local_experts"  #: the experts count's field
MULTIPLIERS = ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling")

#: configuration_granitemoe.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 11008, "max_position_embeddings": 2048, "num_key_value_heads": None,
            "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False,
            "embedding_multiplier": 1.0, "residual_multiplier": 1.0, "attention_multiplier": 1.0,
            "logits_scaling": 1.0, "num_local_experts": 8, "num_experts_per_tok": 2}

# Its router (softmax over the k chosen logits) is ``architectures.composed.ROUTERS["granitemoe"]``.


def read(fields) -> Read:
    experts, top_k = expert_counts(fields, "num_local_experts")
    bias = fields.flag("attention_bias")
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, activation=fields.activation(), moe="granitemoe")
    ffn = fields.count("intermediate_size")
    return Read(recipe, ffn=ffn, kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=fields.count("head_dim"),
                moe=(experts, top_k, ffn, 0), notes=multiplier_note(fields, MULTIPLIERS))
