"""Qwen3-Next (HF ``model_type`` qwen3_next: Qwen3-Next-80B-A3B), as ``modeling_qwen3_next.py`` and
``configuration_qwen3_next.py`` of transformers 5.24.0 build it.

Qwen3NextDecoderLayer (modeling_qwen3_next.py:871-937): x + mixer(input_layernorm(x)), then
h + MLP(post_attention_layernorm(h)); every norm Qwen3NextRMSNorm (:126-143): in fp32, × (1 + weight), cast
back (Gemma's, ``rmsnorm_offset``). The mixer differs by layer: ``layer_types[i] == "linear_attention"``
(L_l of them; by default every layer but each ``full_attention_interval``-th, 4) is Qwen3NextGatedDeltaNet
(:583-769, :func:`~symbolic.models.architectures.mixers.gated_deltanet`), "full_attention" is
Qwen3NextAttention (:229-304): GQA of ``head_dim`` with Q's projection doubled for an output gate
(sigmoid(gate) × the attention's output before o_proj), a per-head RMSNorm (1 + weight) on Q and K,
partial rotary (``partial_rotary_factor``, 0.25 by default) by ``torch.cat``. The MLP: Qwen3NextSparseMoeBlock
(:849-868: softmax router in fp32, top-k, renormalised when ``norm_topk_prob``; the experts' eager loop; a
shared expert of ``shared_expert_intermediate_size`` behind a sigmoid gate h → 1) where layer i is not in
``mlp_only_layers``, ``num_experts`` > 0 and (i + 1) % ``decoder_sparse_step`` == 0, else a SwiGLU of
``intermediate_size`` (L_d layers). The kinds are shares of the layer's terms: totals over the model exact,
a layer's terms the layers' average.
"""
from ..config import Recipe
from .base import Read, no_attention_dropout, rotary_factor, source

MODEL_TYPE = "qwen3_next"
TITLE = "Qwen3-Next"
SOURCE = source(MODEL_TYPE)
EXPERTS = "num_experts"  #: the experts count's field

#: configuration_qwen3_next.py's Qwen3NextConfig defaults of the fields read
DEFAULTS = {"intermediate_size": 5632, "max_position_embeddings": 32768, "num_key_value_heads": 2,
            "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "attention_dropout": 0.0,
            "head_dim": 256, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
            "linear_num_key_heads": 16, "linear_num_value_heads": 32, "decoder_sparse_step": 1,
            "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts_per_tok": 10,
            "num_experts": 512, "norm_topk_prob": True, "mlp_only_layers": None, "layer_types": None}

#: the kinds Qwen3NextDecoderLayer builds a mixer for (another kind builds none and fails in forward)
KINDS = ("linear_attention", "full_attention")

# Its routers are ``architectures.composed.ROUTERS["qwen2_moe"]`` and ``["qwen2_moe_norm"]`` (the same top-k
# router and eager experts loop; its shared expert and gate are Qwen2-MoE's).


def layer_types(fields) -> list[str]:
    """One kind per layer, as Qwen3NextConfig.__post_init__ fills them in: ``layer_types``, else
    "full_attention" every ``full_attention_interval``-th layer (4) and "linear_attention" elsewhere."""
    types = fields.value("layer_types")
    if types is None:
        interval = fields.raw.get("full_attention_interval", 4)
        if isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0:
            fields.refuse("full_attention_interval", interval, "full_attention_interval as a positive integer")
        types = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(fields.layers)]
    unknown = sorted(set(types) - set(KINDS))
    if unknown:
        fields.refuse("layer_types", unknown, "Qwen3-Next's layer kinds linear_attention and full_attention")
    return types


def dense_layers(fields, experts: int) -> int:
    """Layers with the dense MLP: i in ``mlp_only_layers``, or no experts, or (i + 1) % step ≠ 0."""
    only = fields.value("mlp_only_layers") or []
    if not isinstance(only, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in only):
        fields.refuse("mlp_only_layers", only, "mlp_only_layers as a list of layer indices")
    step = fields.count("decoder_sparse_step")
    return sum(1 for i in range(fields.layers) if i in only or not experts or (i + 1) % step)


def cached(fields) -> bool:
    """``use_cache`` (true by default): HF then builds a cache in a training step too, which holds each
    gated DeltaNet's final state (output_final_state, modeling_qwen3_next.py:717-736)."""
    value = fields.raw.get("use_cache", True)
    if not isinstance(value, bool):
        fields.refuse("use_cache", value, "use_cache true or false")
    return value


def kernel_note(recipe: Recipe, values: dict, positions: int) -> str:
    """What HF's torch path of the gated DeltaNet keeps beyond the GPU kernels the bill counts, per
    linear-attention layer: the two inventories' difference, as a formula and at s = 4096 (or the position
    table's length, if shorter), b = 1."""
    from sympy import Add

    from ...core.dims import SYMBOLS, L, L_l
    from ..architectures import composed
    from ..config import default_seq

    def total(backend):
        return Add(*(t.bytes for t in composed.saved_tensors(recipe, "fused", backend)))

    gap = ((total("cpu") - total("cuda")) * L / L_l).expand()
    seq = default_seq(positions)
    at = gap.subs({SYMBOLS[k]: v for k, v in {**values, "s": seq, "b": 1}.items() if k in SYMBOLS})
    return ("the gated DeltaNet is billed as it runs on GPU, where HF calls causal-conv1d (its CausalConv1dFn "
            "keeps the conv's input; SiLU fused) and flash-linear-attention's chunk_gated_delta_rule (its "
            "ChunkGatedDeltaRuleFunction keeps q, k normalised in bf16 with their rstd, v, the decay's cumsum, β "
            "and the chunks' solved A; fla bc3b101 fla/ops/gated_delta_rule/chunk.py:310) when they are installed; "
            "HF's torch path (CPU, or without them; traced exactly) keeps the fp32 chunk products, their 64×64 "
            f"matrices and the scan's states: {int(at):,} B per linear-attention layer more at s = {seq:,}, b = 1 "
            "(the difference of mixers.gated_deltanet's two inventories; 81,920·b·H_v·⌈s/64⌉ B of it are the five "
            "fp32 64 × 64 matrices per chunk and value head). FLOPs are the torch path's (padded to 64·⌈s/64⌉ "
            "positions, its triangular solves' backward matmuls), which the FLA kernels do not count the same "
            "way; that difference is not itemised")


def read(fields) -> Read:
    no_attention_dropout(fields, 'Qwen3-Next')
    rotary_factor(fields, 0.25)  # checked; the rotary part is rebuilt by torch.cat whatever its width
    kinds = layer_types(fields)
    linear = kinds.count("linear_attention")
    experts = fields.value("num_experts")
    experts = 0 if experts == 0 else fields.count("num_experts")
    top_k = fields.count("num_experts_per_tok") if experts else 0
    if experts and top_k > experts:
        fields.refuse("num_experts_per_tok", top_k, f"at most num_experts ({experts}) experts per token")
    dense = dense_layers(fields, experts)
    moe = experts and dense < fields.layers
    bias = fields.flag("attention_bias")
    recipe = Recipe(MODEL_TYPE, norm="rmsnorm_offset", qkv_bias=bias, o_bias=bias, qk_norm="head",
                    activation=fields.activation(), rotary_cat=True, gated_attention=True,
                    gated_deltanet=linear > 0, final_state_cached=linear > 0 and cached(fields),
                    moe=("qwen2_moe_norm" if fields.flag("norm_topk_prob") else "qwen2_moe") if moe else "none",
                    shared=bool(moe), shared_gate=bool(moe), dense_layers=bool(moe) and dense > 0)
    dims, notes = {}, []
    expert_ffn = fields.count("moe_intermediate_size") if moe else 0
    if moe:
        shared = fields.value("shared_expert_intermediate_size")
        dims["f_s"] = 0 if shared == 0 else fields.count("shared_expert_intermediate_size")
        if dense:
            dims["L_d"] = dense
            notes.append(f"{dense} of the {fields.layers} layers have a dense MLP (width "
                         f"{fields.count('intermediate_size')}) instead of the MoE: over the whole model exact; a "
                         "layer's terms are the layers' average")
    if linear:
        key_heads, value_heads = fields.count("linear_num_key_heads"), fields.count("linear_num_value_heads")
        if value_heads % key_heads:
            fields.refuse("linear_num_value_heads", value_heads, f"a multiple of linear_num_key_heads ({key_heads}): "
                          "each query/key head serves H_v/H_k value heads")
        dims.update(L_l=linear, H_k=key_heads, H_v=value_heads, D_k=fields.count("linear_key_head_dim"),
                    D_v=fields.count("linear_value_head_dim"), K_c=fields.count("linear_conv_kernel_dim"))
        notes.append(kernel_note(recipe, {**dims, "h": fields.hidden}, fields.count("max_position_embeddings")))
        notes.append(f"{linear} of the {fields.layers} layers are gated DeltaNet (linear attention), the others "
                     "gated full attention: parameters, FLOPs and activations over the whole model are exact; a "
                     "layer's terms are the layers' average, so under pipeline parallelism (pp > 1) a stage's own "
                     "mix is not itemised apart")
    return Read(recipe, ffn=fields.count("intermediate_size"), kv_heads=fields.count("num_key_value_heads",
                                                                                       fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=fields.count("head_dim"), dims=dims,
                moe=(experts, top_k, expert_ffn, 0) if moe else (0, 0, 0, 0), notes=tuple(notes))
