"""Phi-3.5-MoE (HF ``model_type`` phimoe), as ``modeling_phimoe.py`` of transformers 5.24.0 builds it.

PhimoeDecoderLayer: pre-LayerNorm (``nn.LayerNorm`` with bias, also the final norm), sequential;
PhimoeAttention: Llama's (Q, K, V, O with ``attention_bias``, full rotary by ``rotate_half``);
PhimoeSparseMoeBlock: PhimoeTopKRouter (h → E, no bias) and ``sparsemixer`` — two rounds of a
threshold mask, a Gumbel-sampled expert and a softmax, with PhimoeMultiplier's straight-through
gradient (``architectures.expert_parts.sparsemixer_saved``) — and PhimoeExperts, the eager experts
loop of width ``intermediate_size``; ``input_jitter_noise`` > 0 multiplies the router's input in
place by uniform noise, twice (the block's and the router's); ``lm_head_bias``.
"""
from ..config import Recipe
from .base import Read, source

MODEL_TYPE = "phimoe"
TITLE = "Phi-3.5-MoE"
SOURCE = source(MODEL_TYPE)
EXPERTS = "num_local_experts"  #: the experts count's field

#: configuration_phimoe.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 6400, "max_position_embeddings": 131072, "num_key_value_heads": 8,
            "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "lm_head_bias": False,
            "num_local_experts": 16, "num_experts_per_tok": 2, "input_jitter_noise": 0.0,
            "router_jitter_noise": 0.01, "sliding_window": None}

# Its routers are ``architectures.composed.ROUTERS["phimoe"]`` and ``["phimoe_jitter"]``.


def read(fields) -> Read:
    experts, top_k = fields.count("num_local_experts"), fields.count("num_experts_per_tok")
    if top_k != 2:  # sparsemixer ignores top_k: it always picks one expert, then a second
        fields.refuse("num_experts_per_tok", top_k, "Phi-3.5-MoE's sparsemixer, which picks two experts per token "
                      "whatever num_experts_per_tok says (give 2)")
    if experts < 2:
        fields.refuse("num_local_experts", experts, "at least the two experts sparsemixer picks")
    jitter = fields.value("input_jitter_noise")
    if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or jitter < 0:
        fields.refuse("input_jitter_noise", jitter, "a noise amplitude ≥ 0")
    bias = fields.flag("attention_bias")
    recipe = Recipe(MODEL_TYPE, norm="layernorm", qkv_bias=bias, o_bias=bias, activation=fields.activation(),
                    moe="phimoe_jitter" if jitter > 0 else "phimoe", logits_bias=fields.flag("lm_head_bias"))
    ffn = fields.count("intermediate_size")
    return Read(recipe, ffn=ffn, kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=fields.count("head_dim"),
                moe=(experts, top_k, ffn, 0))
