"""OLMoE (HF ``model_type`` olmoe), as ``modeling_olmoe.py`` of transformers 5.24.0 builds it.

OlmoeDecoderLayer: pre-RMSNorm (Llama's), sequential; OlmoeAttention: ``attention_bias`` on Q, K,
V, O, an RMSNorm over all query features (``hidden_size``) and over all key features
((h/a)·g) before the full rotary — OLMo-2's full-width QK-norm, in Llama's RMSNorm;
OlmoeSparseMoeBlock: OlmoeTopKRouter (softmax in fp32, top-k, renormalised when
``norm_topk_prob``, weights cast back to bf16) and OlmoeExperts (the eager loop), whose code is
Qwen3-MoE's (diffed in 5.24.0: only the experts' width differs, ``intermediate_size`` here).
``clip_qkv``: Q, K and V clamped in place (``clamp_``) after their projections; each in-place
clamp keeps a copy of its input for backward (traced: 2·s·b·(a + 2g)·d_h bytes per layer).
"""
from ..config import Recipe
from .base import Read, expert_counts, source

MODEL_TYPE = "olmoe"
TITLE = "OLMoE"
SOURCE = source(MODEL_TYPE)
EXPERTS = "num_experts"  #: the experts count's field (attribute_map: num_local_experts)

#: configuration_olmoe.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 2048, "max_position_embeddings": 4096, "num_key_value_heads": None,
            "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "clip_qkv": None,
            "num_experts": 64, "num_experts_per_tok": 8, "norm_topk_prob": False}

# Its routers are ``architectures.composed.ROUTERS["olmoe"]`` and ``["olmoe_norm"]``.


def read(fields) -> Read:
    clip = fields.value("clip_qkv")
    if clip is not None and (isinstance(clip, bool) or not isinstance(clip, (int, float)) or clip <= 0):
        fields.refuse("clip_qkv", clip, "clip_qkv null or a positive bound")
    if fields.value("head_dim") not in (None, fields.hidden // fields.heads):
        # q_norm is RMSNorm(hidden_size): HF's own layer only runs with heads of width h/a
        fields.refuse("head_dim", fields.value("head_dim"), "OLMoE with heads of width hidden_size/num_attention_heads")
    experts, top_k = expert_counts(fields, "num_experts")
    bias = fields.flag("attention_bias")
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, qk_norm="full", activation=fields.activation(),
                    moe="olmoe_norm" if fields.flag("norm_topk_prob") else "olmoe", clip_qkv=clip is not None)
    ffn = fields.count("intermediate_size")
    return Read(recipe, ffn=ffn, kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), moe=(experts, top_k, ffn, 0))
