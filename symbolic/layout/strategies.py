"""Strategies: functions from an inventory of saved tensors to another.

Each transformation states the condition it assumes and its source. They
compose: ``selective_recompute(sequence_parallel(tensor_parallel(inv)))`` is
Korthikanti Eq 6. A :class:`Strategy` names a composition so the CLI, the
claims and the bill all ask for the same thing.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr, Integer, sympify

from ..core.dims import C_f, L, L_1, L_m, L_p, T_e, a, b, c, e, e_t, f_e, p, s, t, v
from ..core.tensors import DTYPE_BYTES, Axis, Group, Inventory, SavedTensor
from .choices import (FLOAT_ACTIVATION_DTYPES, MOE_DISPATCHERS, OP_SAC, RECOMPUTE, RECOMPUTE_MODULES,  # noqa: F401
                      RECOMPUTE_POLICIES, SP_INPUTS)  # RECOMPUTE: the policies a notebook offers (notebooks/03)


def tensor_parallel(inventory: Inventory, ways: Expr = t) -> Inventory:
    """Split the heads and the FFN width ``ways`` ways (Korthikanti §4.2.1).

    Tensors on the ``TENSOR`` axis shrink by ``ways``; the LayerNorm/dropout
    region (``SEQUENCE`` axis) stays whole on every GPU: the 10sbh of Eq 2.
    """
    return inventory.map(lambda x: x.shard(ways) if x.split is Axis.TENSOR else x, f"tensor_parallel({ways})")


#: The terms of the sequence-parallel region proper — the norms, the layer's input and the output side's
#: final norm — that DTensor's sequence parallelism keeps sharded; every other sequence-axis term is
#: computed after the all-gather into the attention or the MLP (:func:`sequence_parallel`, ``gathered``).
SP_REGION = ("attention/norm_", "attention/layernorm_", "mlp/norm_", "mlp/layernorm_", "output/final_norm_")


def sequence_parallel(inventory: Inventory, ways: Expr = t, gathered: bool = False) -> Inventory:
    """Split the LayerNorm/dropout region along the sequence (Korthikanti §4.2.2).

    Condition: runs on the tensor-parallel group, so ``ways`` is the TP size.
    ``gathered=False`` (Megatron-Core): the linear layers' inputs are kept
    sequence-sharded and all-gathered again in backward
    (``LinearWithGradAccumulationAndAsyncCommunication``: ``ctx.save_for_backward(input, weight)``
    of the shard, the all-gather repeated in ``backward``; megatron/core/tensor_parallel/layers.py
    at NVIDIA/Megatron-LM d98e8a6, lines 604 and 667-680). ``gathered=True`` (PyTorch DTensor:
    ``PrepareModuleInput`` redistributes the block's input to ``Replicate`` and the colwise linear
    keeps that all-gathered tensor — torchtitan's placements, transformers' tp_plan): only the
    norms (:data:`SP_REGION`) and the layer input stay sharded; the attention's and the MLP's
    sequence-axis terms and the output layer's input are whole on every rank. Measured on one rank
    of PyTorch's ``SequenceParallel`` plan (:mod:`symbolic.per_rank`).
    """
    def shard(x: SavedTensor) -> SavedTensor:
        if x.split is not Axis.SEQUENCE:
            return x
        if gathered and x.group is not Group.LAYER_INPUT and not x.name.startswith(SP_REGION):
            return x
        return x.shard(ways)
    return inventory.map(shard, f"sequence_parallel({ways}{', gathered' if gathered else ''})")


def context_parallel(inventory: Inventory, ways: Expr = c) -> Inventory:
    """Split every sequence over ``ways`` ranks (context parallelism: ring
    attention, Liu et al. 2023, arXiv 2310.01889; Megatron-LM's
    ``--context-parallel-size``; seed 004 §06.2).

    Each rank only ever holds its s/ways tokens: every shape entry that counts
    this rank's tokens — s, and the tokens routed to one expert T_e (∝ s) —
    is divided by ``ways``. The one exception is the key axis of a score
    matrix (b, a, s, s): a rank's queries attend to all s keys, so the score
    tensor shrinks once, along its query axis. Condition: ring-style
    attention, keys and values circulated among the ranks (not saved), the
    loss computed on each rank's own tokens.

    A shape rewrite, not a split axis: a term carries one parallel axis
    (``split``/``split_dim``, TP or SP), and context parallelism is a second
    split of the same tensors, so it composes with TP, SP and recompute by
    rewriting the logical shape (``Axis.CONTEXT`` stays unused).
    """
    local = {s: s / ways, T_e: T_e / ways}

    def shard(x: SavedTensor) -> SavedTensor:
        shape = list(x.shape)
        keys = len(shape) - 1 if len(shape) >= 2 and shape[-2:] == [s, s] else None
        shape = [entry if i == keys else sympify(entry).xreplace(local) for i, entry in enumerate(shape)]
        return replace(x, shape=tuple(shape))
    return inventory.map(shard, f"context_parallel({ways})")


#: The marker before the split a routed-expert term has after :func:`expert_dispatch` (in its note).
DISPATCHED = "; after dispatch: "


def expert_dispatch(inventory: Inventory, expert_ways: Expr = e, expert_tensor_ways: Expr = t,
                    tensor_ways: Expr = t, capacity: Expr = Integer(1)) -> Inventory:
    """The routed experts' saved tensors on one GPU after dispatch (Megatron-Core's
    ``MoEAlltoAllTokenDispatcher``, ``megatron/core/transformer/moe/token_dispatcher.py``
    at NVIDIA/Megatron-LM d98e8a6: permute, all-to-all over EP, all-gather over
    the expert TP group, sort by local expert; the reverse to combine).

    Applies to the ``EXPERT``-axis terms, shape (experts, tokens per expert,
    width); the router-side terms (one row per token of this rank) are on the
    ``SEQUENCE`` axis and split by SP and CP as any other. Term by term:

    * experts: a rank holds E/e of them (``expert_ways`` = e shards axis 0);
    * tokens per local expert: a rank routes its own s·b/(c·t) tokens under SP
      (s·b/c, replicated over t, without SP); under balanced routing each of
      the e ranks of its EP group sends it 1/e of the assignments to its
      experts, and the all-gather over the e_t expert-TP ranks multiplies them
      by e_t — ``T_e · e · e_t / t`` per local expert, T_e = s·b·k/E (÷c under
      context parallelism, already in T_e's s). Without SP the TP ranks hold the
      same tokens and there is no gather: valid only with e_t = t, where the
      same formula gives T_e·e. ``capacity`` (C_f) scales the busiest expert's
      share (drop-and-pad capacity ``ceil(tokens·k/E·C_f)`` in ``moe_utils.get_capacity``,
      its ceiling left out: exact when the share is whole);
    * width: the f_e-wide tensors (fc1's 2f_e output, SwiGLU's f_e-wide ones)
      are split by e_t (``TEColumnParallelGroupedLinear``); the h-wide ones
      (the gathered input, fc2's output before its reduce-scatter, the
      weighted output) and the per-assignment weight and index keep their width.

    So with e_t = t the intermediate is /t, the h-wide tensors are not, and
    none of it shrinks with e under balanced routing: e divides the experts'
    parameters, not their activations.
    """
    gathered = capacity * expert_ways * expert_tensor_ways / tensor_ways
    narrow = {f_e: f_e / expert_tensor_ways}

    def dispatch(x: SavedTensor) -> SavedTensor:
        if x.split is not Axis.EXPERT:
            return x
        experts, tokens, *width = x.shape
        narrowed = [sympify(w).xreplace(narrow) for w in width]
        split = [f"experts /{expert_ways}", f"tokens ×{expert_ways}·{expert_tensor_ways}/{tensor_ways}"
                 + (f"·{capacity}" if capacity != 1 else "")] + (
            [f"width /{expert_tensor_ways}"] if narrowed != list(width) else [])
        return replace(x, shape=(experts, tokens * gathered, *narrowed),
                       note=x.note + DISPATCHED + ", ".join(split)).shard(expert_ways)
    return inventory.map(dispatch, f"expert_dispatch(e={expert_ways}, e_t={expert_tensor_ways})")


def flash_attention(inventory: Inventory) -> Inventory:
    """FlashAttention (Dao et al. 2022; seed 004 §05.2, §07): Q·Kᵀ, P, dS, dP stay in SRAM
    tiles; of the (b, a, s, s) tensors nothing is saved or materialised, and
    the log-sum-exp (b, a, s), fp32, is saved instead. Condition: the fused
    attention kernel; the dropout mask is regenerated from the RNG state."""
    kept = [term for term in inventory if term.shape[-2:] != (s, s)]
    already = "attention/logsumexp" in inventory.names()  # a fused-attention layer (LLaMA, MoE) as it is
    if not already and any(term.name.startswith("attention/") for term in inventory):
        kept.append(SavedTensor("attention/logsumexp", (b, a, s), "fp32", Axis.TENSOR, 1, Group.BODY,
                                "Dao et al. 2022 (FlashAttention) §3.1", "row statistics kept for backward"))
    return Inventory(tuple(kept), inventory.applied + ("flash_attention",))


def selective_recompute(inventory: Inventory) -> Inventory:
    """Drop the attention core — softmax output, its dropout mask and output —
    and recompute it in backward (Korthikanti §5): the 5as/h term goes."""
    return inventory.map(lambda x: None if x.group is Group.ATTENTION_CORE else x, "selective_recompute")


def fused_expert_activation(inventory: Inventory) -> Inventory:
    """The experts' SwiGLU as one fused kernel: it saves only its input, fc1's
    [tokens, 2f_e] output, and recomputes SiLU(gate) in backward — the eager
    ``act_fn(gate) * up`` also keeps SiLU(gate) for the multiply. Megatron-Core:
    ``megatron/core/fusions/fused_bias_swiglu.py`` (``SwiGLUFunction`` saves its
    input only), used by the grouped experts with ``bias_activation_fusion``;
    seed 004 §05.3's fused expert kernel (its [C_local, 2n] input stays). The
    activation's output, the down projection's input, is kept by that GEMM."""
    return inventory.map(lambda x: None if x.group is Group.EXPERT_ACTIVATION else x, "fused_expert_activation")


def expert_activation_recompute(inventory: Inventory) -> Inventory:
    """Megatron-Core's ``recompute_modules = ["moe_act"]`` (TransformerConfig:
    "recompute the MoE MLP activation function", an output-discarding
    checkpoint; needs ``moe_grouped_gemm``): the activation's saved tensors and
    its output — fc2's input, [tokens, f_e] — are freed after forward and
    recomputed from fc1's output, which stays. Element-wise work only: no
    matmul FLOPs are added."""
    dropped = (Group.EXPERT_ACTIVATION, Group.EXPERT_ACTIVATION_OUTPUT)
    return inventory.map(lambda x: None if x.group in dropped else x, "expert_activation_recompute")


#: Megatron-Core at NVIDIA/Megatron-LM d98e8a6 (the dispatcher, its permute/unpermute and the experts read there).
MEGATRON_MOE = "Megatron-Core d98e8a6 moe/token_dispatcher.py (MoEAlltoAllTokenDispatcher), moe/moe_utils.py"
MEGATRON_EXPERTS = "Megatron-Core d98e8a6 moe/experts.py (TEGroupedMLP.forward, bias_act_func)"

#: The HF eager loop's own dispatch and combine terms, which Megatron's dispatcher does not create:
#: the per-expert torch.where index, the weight multiply after the down projection (its weight and
#: the down output it keeps) and index_add_'s bf16 source.
HF_DISPATCH_TERMS = ("moe/expert/token_index", "moe/expert/routing_weight", "moe/expert/down_output",
                     "moe/expert/combine_input")


def megatron_alltoall_dispatch(inventory: Inventory, pad_to_capacity: bool = False, capacity: Expr = C_f,
                               probs_dtype: str = "bf16") -> Inventory:
    """The routed MLP's saved tensors when Megatron-Core's alltoall dispatcher feeds
    ``TEGroupedMLP`` (``moe_token_dispatcher_type="alltoall"``, ``moe_permute_fusion=False``,
    ``bias_activation_fusion=False``, ``use_te_activation_func=False``: the unfused path), on
    the single-rank inventory (``expert_dispatch`` then splits it as any other). Term by term,
    N this rank's tokens, E experts, k per token (``moe_utils.permute``/``unpermute``):

    * dropless (no ``moe_pad_expert_input_to_capacity``): ``permute`` sorts the routing map
      ``routing_map.bool().T`` [E, N] with one ``argsort`` of E·N int64, and the probabilities'
      gather ``probs.T.contiguous().reshape(-1)[flat_sorted]`` keeps ``flat_sorted``, a view of
      it — the whole E·N storage (``moe/dispatch/argsort``, the router scores' shape);
      ``sorted_indices = flat_sorted % N`` (N·k int64) is kept by the tokens'
      ``index_select`` and, as the same storage, by ``unpermute``'s ``scatter_add_`` (its
      index; ``moe/dispatch/sorted_indices``, the top-k indices' shape);
    * drop-and-pad (``pad_to_capacity``): each expert's rows are the first ``capacity`` =
      C_f·N·k/E of ``argsort(routing_map.T, dim=-1)`` (``get_capacity``, its ceiling left out as
      in ``expert_dispatch``): ``sorted_indices`` (E·capacity int64, kept by ``index_select``)
      and the probabilities' flat ``indices_1D`` (E·capacity int64, kept by ``index_select``);
    * the all-to-all, the expert-TP all-gather/reduce-scatter and ``sort_chunks_by_idxs``
      (``split`` + ``cat``) keep nothing; ``unpermute`` gets no probabilities (they were
      applied in the experts), so nothing of the h-wide combine is kept;
    * the experts (``bias_act_func``'s GLU): ``silu(x_glu) * (x_linear + glu_linear_offset)``
      keeps SiLU's output and the offset sum (a new [T, f_e] tensor even at offset 0.0,
      ``moe/expert/up_offset``), ``act·up × permuted_probs`` keeps the product
      (``moe/expert/down_input``, now the probabilities multiply's) and the probabilities
      (``moe/expert/permuted_probs``, [T, 1] in the router's dtype: ``probs.type_as(logits)``,
      bf16 unless ``moe_router_dtype`` is fp32), and fc2 keeps the weighted product cast back
      (``moe/expert/weighted_down_input``). The HF loop's own terms
      (:data:`HF_DISPATCH_TERMS`) go.

    Under ``fused_expert_activation`` (``weighted_bias_swiglu_impl``: saves fc1's output and
    the probabilities) and ``moe_act`` recompute (``CheckpointWithoutOutput`` keeps the same two
    inputs) the SiLU output, the offset sum and the unweighted product go; fc2's input stays
    under the fused kernel and goes under ``moe_act``.

    Not changed (stated, not modelled): the router's own saved tensors stay the family's HF
    router's (Megatron's ``TopKRouter`` is not itemised here).
    """
    names = inventory.names()
    if "moe/router_scores" not in names or "moe/expert/down_input" not in names:
        return inventory
    scores, topk = inventory["moe/router_scores"], inventory["moe/topk_indices"]
    narrow = inventory["moe/expert/down_input"]
    weight = inventory["moe/expert/routing_weight"]

    def index(name, like, last, note):
        return replace(like, name=name, shape=(*like.shape[:-1], last), dtype="int64", source=MEGATRON_MOE, note=note)

    if pad_to_capacity:
        dispatcher = (index("moe/dispatch/sorted_indices", topk, topk.shape[-1] * capacity,
                            "drop-and-pad: each expert's first capacity rows (E·capacity = C_f·N·k), kept by "
                            "the tokens' index_select and unpermute's scatter_add_"),
                      index("moe/dispatch/probs_indices", topk, topk.shape[-1] * capacity,
                            "drop-and-pad: the probabilities' flat indices (E·capacity), kept by their index_select"))
    else:
        dispatcher = (index("moe/dispatch/argsort", scores, scores.shape[-1],
                            "argsort of the [E, N] routing map, kept whole: the probabilities' gather keeps a view"),
                      index("moe/dispatch/sorted_indices", topk, topk.shape[-1],
                            "the token of each of the N·k rows, kept by index_select and unpermute's scatter_add_"))
    experts = (
        replace(narrow, name="moe/expert/up_offset", group=Group.EXPERT_ACTIVATION, source=MEGATRON_EXPERTS,
                note="x_linear + glu_linear_offset, a new tensor kept by the GLU multiply"),
        replace(narrow, name="moe/expert/act_up_product", group=Group.EXPERT_ACTIVATION, source=MEGATRON_EXPERTS,
                note="act(gate)·up, kept by the probabilities multiply"),
        replace(weight, name="moe/expert/permuted_probs", dtype=probs_dtype, source=MEGATRON_EXPERTS,
                note="the token's probability for this expert, permuted with it, kept by the multiply"),
        replace(narrow, source=MEGATRON_EXPERTS, note="act(gate)·up·p cast back: fc2's input"),
    )
    kept = []
    for term in inventory:
        if term.name in HF_DISPATCH_TERMS:
            continue
        if term.name == "moe/expert/down_input":
            kept += experts
            continue
        kept.append(term)
        if term.name == "moe/topk_indices":
            kept += dispatcher
    applied = "megatron_alltoall_dispatch" + ("(pad to capacity)" if pad_to_capacity else "")
    return Inventory(tuple(kept), inventory.applied + (applied,))


#: Megatron-Core's two recomputable norms (``TransformerLayer.input_layernorm`` and
#: ``pre_mlp_layernorm``) as the inventories name their terms, and the terms that keep each
#: norm's output (its consumers' saved inputs).
RECOMPUTED_NORMS = {
    "attention/": (("attention/norm_", "attention/layernorm_"), ("attention/qkv_input",)),
    "mlp/": (("mlp/norm_", "mlp/layernorm_"), ("mlp/input", "mlp/gate_up_input", "mlp/fc1_input",
                                                "moe/router_input")),
}


def norm_recompute(inventory: Inventory, dtype: str = "bf16") -> Inventory:
    """Megatron-Core's ``recompute_modules = ["layernorm"]`` (``transformer_layer.py``:
    ``input_layernorm`` and ``pre_mlp_layernorm`` each run under
    ``tensor_parallel.CheckpointWithoutOutput``): the norm runs under ``torch.no_grad`` and
    ``save_for_backward`` keeps only its input; ``discard_output_and_register_recompute`` frees
    its output's storage once the consumers (QKV; the router and the experts' dispatch, or the
    dense MLP) have run, and recomputes it when their gradient arrives. Term by term, for
    each of the two norms (:data:`RECOMPUTED_NORMS`):

    * the norm's own saved tensors go (an eager RMSNorm's fp32 input copy, rstd and x·rstd; a
      LayerNorm's input and statistics);
    * its output as its consumers keep it goes (``attention/qkv_input``, ``moe/router_input``,
      ``mlp/...input``): the storage is resized to 0 until backward;
    * the checkpoint keeps the norm's input in the activation dtype ``dtype`` — the term the
      norm declared for its input, at that dtype (a norm that reads an input another term
      already declares, GPT-NeoX's second norm of x, adds nothing).

    Element-wise work only: no matmul FLOPs are added. Post-norms (Gemma-2's, OLMo-2's) are not
    Megatron's two norms and stay."""
    kept = []
    for term in inventory:
        block = next((b for b in RECOMPUTED_NORMS if term.name.startswith(b)), None)
        if block is None:
            if term.name in RECOMPUTED_NORMS["mlp/"][1]:  # moe/router_input
                continue
            kept.append(term)
            continue
        prefixes, consumers = RECOMPUTED_NORMS[block]
        if term.name in consumers:
            continue
        if term.name.startswith(prefixes):
            if term.name.endswith(("_input", "_input_fp32")):
                name = term.name.removesuffix("_fp32")
                kept.append(replace(term, name=name, dtype=dtype,
                                    note="the norm's input, kept by CheckpointWithoutOutput (layernorm recompute)"))
            continue
        kept.append(term)
    return Inventory(tuple(kept), inventory.applied + ("norm_recompute",))


#: The tensors the attention kernel keeps of an MLA layer's up projections and RoPE (parts.attention_core).
MLA_UP_PROJ_OUTPUTS = ("attention/query", "attention/key", "attention/value")


def mla_up_proj_recompute(inventory: Inventory, sequence_parallel: bool = False) -> Inventory:
    """Megatron-Core's ``recompute_modules = ["mla_up_proj"]`` (``MLASelfAttention``,
    ``multi_latent_attention.py`` at d98e8a6): ``qkv_up_proj_and_rope_apply`` — the q and kv up
    projections, RoPE on their rotary slices, the concatenations into Q and K — runs under a
    ``CheckpointWithoutOutput``: under ``torch.no_grad`` (nothing inside is kept), its tensor inputs
    saved, its outputs Q, K, V freed once the core attention has run
    (``discard_output_and_register_recompute(core_attn_out)``) and recomputed for the kernel's
    backward. Term by term, on an MLA layer (``attention/kv_b_input`` declared):

    * the kernel's Q, K, V go (:data:`MLA_UP_PROJ_OUTPUTS`; HF's V is a slice of the kv up
      projection's output, kept whole — gone all the same);
    * the checkpoint's inputs stay: ``q_compressed`` and ``kv_compressed``, the normalised latents
      the up projections read (``attention/q_b_input``, ``attention/kv_b_input``, declared), and
      ``k_pos_emb``, the rotary key, added: with sequence parallelism over t > 1 ranks Megatron
      all-gathers it (``gather_from_sequence_parallel_region``) into a new (s, b, d_r) tensor,
      whole on every TP rank; otherwise it is a ``torch.split`` view of the kv down projection's
      (s, b, r_kv + d_r) output, which it keeps whole (``attention/k_pos_emb``).

    Condition: Megatron's TE layer spec (``linear_kv_down_proj`` a plain, duplicated linear), the
    unfused RoPE; the norms around the latents are outside the checkpoint and stay. Element-wise
    work and the two up projections are re-run: their FLOPs are not counted (the FLOPs ledger's
    recompute is the attention core's)."""
    from ..core.dims import d_r, r_kv

    if "attention/kv_b_input" not in inventory.names():
        return inventory
    latent = inventory["attention/kv_b_input"]
    if sequence_parallel:
        rotary_key = replace(latent, name="attention/k_pos_emb", shape=(s, b, d_r), split=Axis.NONE, split_dim=None,
                             source="Megatron-Core d98e8a6 multi_latent_attention.py",
                             note="the rotary key all-gathered from the sequence-parallel region, kept by the "
                                  "mla_up_proj checkpoint")
    else:
        rotary_key = replace(latent, name="attention/k_pos_emb", shape=(*latent.shape[:-1], r_kv + d_r),
                             source="Megatron-Core d98e8a6 multi_latent_attention.py",
                             note="a view of the kv down projection's output, kept whole by the mla_up_proj "
                                  "checkpoint")
    kept = []
    for term in inventory:
        if term.name in MLA_UP_PROJ_OUTPUTS:
            continue
        kept.append(term)
        if term.name == "attention/kv_b_input":
            kept.append(rotary_key)
    return Inventory(tuple(kept), inventory.applied + ("mla_up_proj_recompute",))


def full_recompute(inventory: Inventory, dtype: str | None = None) -> Inventory:
    """Keep only each layer's input, 2sbh, and recompute the layer in backward.

    The kept input is the layer's input as it arrives on the rank, with the
    split it already has. Without sequence parallelism every TP rank holds it
    whole — Korthikanti Table 2's 2sbh: dividing it by t would need an extra
    all-gather (Megatron's ``distribute_saved_activations``). With sequence
    parallelism the residual stream between layers *is* sequence-sharded, so
    the input arrives as s/t tokens and is kept so: 2sbh/t. Megatron-Core
    (``transformer_config.py`` at NVIDIA/Megatron-LM d98e8a6) refuses
    ``distribute_saved_activations`` with sequence parallelism for that
    reason; torchtitan's blocks receive ``Shard(1)`` hidden states
    (``models/common/decoder_sharding.py`` at pytorch/torchtitan b5bcd76c);
    measured on one rank of PyTorch's ``SequenceParallel`` + checkpoint
    (:mod:`symbolic.per_rank`). Under context parallelism it is divided by c: a
    rank only ever has its own s/c tokens (:func:`context_parallel` rewrote the
    shape, which is kept). ``dtype``: the activation dtype the layer receives
    its input in — ``torch.utils.checkpoint`` keeps the input as it arrives,
    not what the layer's first op saves of it (HF's RMSNorm saves an fp32
    copy, 4sbh; checkpointing keeps the bf16 input, 2sbh: traced).
    """
    def keep_input(x: SavedTensor):
        if x.group is not Group.LAYER_INPUT:
            return None
        kept = replace(x, note=x.note + ("; full recompute keeps it sequence-sharded, as it arrives (SP)"
                                         if x.sharded_by != 1 else
                                         "; full recompute stores it whole (Korthikanti Table 2)"))
        if dtype is not None and kept.dtype != dtype and not x.name.startswith(OUTSIDE_THE_LAYER):
            kept = replace(kept, dtype=dtype, note=kept.note + f"; checkpointing keeps the {dtype} input")
        return kept
    return inventory.map(keep_input, "full_recompute")


#: Layer-input terms computed outside the checkpointed layer and billed with it (Gemma 3n's slices of the
#: model-level per-layer inputs, ``gemma3n_parts.per_layer_input_slice``): full recompute keeps them as they were saved,
#: in their own dtype (traced: the fp32 norm terms stay fp32)
OUTSIDE_THE_LAYER = ("per_layer_input/slice", "per_layer_input/projection_norm_")


def activation_dtype(inventory: Inventory, dtype: str) -> Inventory:
    """Store floating-point activations in ``dtype`` (masks keep 1 byte).

    The papers assume 2 bytes (bf16/fp16); fp32 training doubles every float term.
    Only terms in the default activation dtype (bf16) change: terms declared at
    a fixed dtype — 1-byte masks, fp32 norm statistics and softmax/log-sum-exp,
    int64 indices — keep theirs.
    """
    if dtype not in FLOAT_ACTIVATION_DTYPES:
        raise ValueError(f"activation dtype must be one of {', '.join(FLOAT_ACTIVATION_DTYPES)}, not {dtype!r}")
    return inventory.map(lambda x: replace(x, dtype=dtype) if x.dtype == "bf16" else x, f"activation_dtype({dtype})")


#: The saved tensors that are a weight GEMM's input and nothing else's backward operand: the copies
#: an FP8 linear layer keeps for its weight gradient. Transformer Engine (``te.Linear``,
#: ``LayerNormLinear``, ``LayerNormMLP`` under ``fp8_autocast``) saves the FP8-cast input ``inputmat``
#: / ``ln_out`` instead of the high-precision one; DeepSeek-V3 (arXiv 2412.19437 §3.3.3
#: "Low-Precision Activation") "cache[s] activations in FP8 format for the backward pass of the
#: Linear operator". Not listed, so kept in their dtype: the attention output projection's input (the
#: attention kernel's backward reads the same tensor in bf16; DeepSeek-V3 keeps it in E5M6), the
#: router's input (the gating stays in high precision, DeepSeek-V3 §3.3.1) and the output head's
#: input (§3.3.1 again).
#: ``*/input``: a composed family's gated MLP input (``mlp/input``, read by its gate and up projections,
#: as Llama's ``gate_up_input``) and the experts' input.
FP8_GEMM_INPUTS = ("*/qkv_input", "*/fc1_input", "*/fc2_input", "*/gate_up_input", "*/down_input", "*/input")


def fp8_gemm_inputs(inventory: Inventory) -> Inventory:
    """Store the linear layers' saved inputs (:data:`FP8_GEMM_INPUTS`) in FP8,
    1 byte per element, whatever float dtype they had.

    Condition: FP8 GEMMs (Transformer Engine's recipes, DeepSeek-V3 §3.3) whose
    weight-gradient GEMM reads the FP8 copy, so the high-precision input is not
    kept besides it. Approximation, named: the scales are not counted — one
    fp32 per tensor under Transformer Engine's per-tensor (delayed or current)
    scaling, 4 B per 128 elements (3.1% of the FP8 term) under DeepSeek-V3's
    1×128 tiles."""
    from fnmatch import fnmatchcase

    def to_fp8(x: SavedTensor) -> SavedTensor:
        if x.dtype in FLOAT_ACTIVATION_DTYPES and any(fnmatchcase(x.name, pat) for pat in FP8_GEMM_INPUTS):
            return replace(x, dtype="fp8", note=x.note + "; saved in FP8 for the weight gradient")
        return x
    return inventory.map(to_fp8, "fp8_gemm_inputs")


def interleave_in_flight(ways: Expr = p, chunks: Expr = v, rank: int = 0) -> Expr:
    """Micro-batch chunks in flight on the first stage of the interleaved 1F1B
    schedule (Narayanan et al. 2021 §2.2.2; Megatron-LM's
    ``forward_backward_pipelining_with_interleaving``): the first rank runs
    ``2(p-1) + (v-1)p`` warm-up forwards, then one more before its first
    backward, each over a chunk of L/(p·v) layers. ``rank``: pipeline rank r runs
    ``2(p-1-r) + (v-1)p`` warm-up forwards (the same function of Megatron-LM at d98e8a6), so the
    middle stage the verdict accounts (rank 1) holds two chunks fewer."""
    return 2 * (ways - 1 - rank) + (chunks - 1) * ways + 1


def in_flight_formula(micro_batches: Expr, stage: str = "first", ways: Expr = p, chunks: Expr = v) -> Expr:
    """:func:`symbolic.layout.layout.in_flight` as one expression of p, v and the
    micro-batches per iteration m (a ``Piecewise``, for printers such as the
    calculator page's JavaScript): 1 without a pipeline; 1F1B min(m, p) on the
    first stage, 1 on the last; interleaved m·v when m = p, else
    min(warm-up + 1, m·v). ``tests/test_layout_rules.py`` holds the two equal."""
    from sympy import Eq, Min, Piecewise

    warm_up = (2 * (ways - 1) if stage == "first" else 0) + (chunks - 1) * ways
    one_f_one_b = Min(micro_batches, ways) if stage == "first" else Integer(1)
    return Piecewise((Integer(1), Eq(ways, 1)), (one_f_one_b, Eq(chunks, 1)),
                     (micro_batches * chunks, Eq(micro_batches, ways)),
                     (Min(warm_up + 1, micro_batches * chunks), True))


@dataclass(frozen=True)
class Strategy:
    """A composition of the strategies above.

    tensor_parallel: divide by t (1 means disabled). sequence_parallel: also
    shard the LayerNorm/dropout region by t (needs tensor_parallel).
    recompute: ``none``, ``selective``, ``full`` or ``op-sac`` (torchtitan's per-op policy, which needs
    ``layer_matmuls``). dtype: the float
    activation dtype. pipeline: account for the first pipeline stage (the one
    holding the most micro-batches) instead of one replica of all L layers.
    in_flight: micro-batch chunks in flight on that stage; ``None`` means the
    schedule's own count on the first stage (1F1B: p; interleaved:
    :func:`interleave_in_flight`), an integer where the micro-batches per
    iteration cap it (``Layout.in_flight``). interleaved: the interleaved
    schedule with v chunks per stage. stage: which pipeline stage is
    accounted, ``first`` (most micro-batches in flight), ``last`` (the
    output side) or, with uneven stages, ``middle`` (rank 1: L_m layers, the
    schedule's rank-1 count in flight when in_flight is None).
    context_parallel: split every sequence over c ranks (:func:`context_parallel`);
    composes with TP/SP (under SP each rank holds s/(c t)) and recompute.
    expert_parallel: the routed experts split over e ranks (symbol e; off: e = 1).
    expert_tensor_parallel: the experts' width split over e_t ranks (symbol
    e_t; off: e_t = t, Megatron-Core's default). expert_capacity: the busiest
    expert's share scaled by C_f (off: balanced). The routed-expert terms are
    always dispatched (:func:`expert_dispatch`); a dense inventory has none.
    recompute_modules: under ``selective``, Megatron-Core's modules recomputed
    (``choices.RECOMPUTE_MODULES``); empty means its default, ``core_attn``;
    ignored under the other policies (the layout refuses them there).
    fused_swiglu: the experts' SwiGLU as one fused kernel (:func:`fused_expert_activation`).
    fp8_gemm_inputs: the linear layers' saved inputs in FP8 (:func:`fp8_gemm_inputs`).
    uneven_stages: the first pipeline stage holds L_1 layers (Megatron-Core's
    first/last-stage layer counts) instead of L/p.
    moe_dispatcher: ``hf`` (the inventory as HF's eager loop keeps it) or ``alltoall``
    (Megatron-Core's dispatcher and grouped experts, :func:`megatron_alltoall_dispatch`).
    pad_to_capacity: Megatron-Core's ``moe_pad_expert_input_to_capacity``: every expert
    computes on C_f × the balanced share of rows (needs expert_capacity).
    sp_inputs: what a sequence-parallel linear layer keeps of its input (``choices.SP_INPUTS``):
    ``sharded`` (Megatron-Core) or ``gathered`` (PyTorch DTensor), :func:`sequence_parallel`.
    """

    tensor_parallel: bool = False
    sequence_parallel: bool = False
    recompute: str = "none"
    dtype: str = "bf16"
    pipeline: bool = False
    in_flight: Expr | None = None
    interleaved: bool = False
    context_parallel: bool = False
    expert_parallel: bool = False
    expert_tensor_parallel: bool = False
    expert_capacity: bool = False
    recompute_modules: tuple = ()
    fused_swiglu: bool = False
    stage: str = "first"
    fp8_gemm_inputs: bool = False
    uneven_stages: bool = False
    moe_dispatcher: str = "hf"
    pad_to_capacity: bool = False
    sp_inputs: str = "sharded"
    #: the loss kernel (``symbolic.models.architectures.output.LOSS_KERNELS``): its saved tensors
    #: (the output side) and its work tensors (the loss instant's transients)
    loss: str = "eager"
    #: whether the output layer's weight trains (False under LoRA, whose base — the output layer
    #: included — is frozen): Liger's loss then keeps and allocates no weight gradient
    output_weight_grad: bool = True
    #: the layer's matmuls in forward order, which ``op-sac`` (torchtitan's per-op policy,
    #: :mod:`symbolic.layout.op_sac`) counts to know which outputs it saves; None under the other policies
    layer_matmuls: Inventory | None = None

    def __post_init__(self) -> None:
        if self.moe_dispatcher not in MOE_DISPATCHERS:
            raise ValueError(f"moe dispatcher must be one of {', '.join(MOE_DISPATCHERS)}, not {self.moe_dispatcher!r}")
        if self.sp_inputs not in SP_INPUTS:
            raise ValueError(f"sp inputs must be one of {', '.join(SP_INPUTS)}, not {self.sp_inputs!r}")
        unknown = set(self.recompute_modules) - set(RECOMPUTE_MODULES)
        if unknown:
            raise ValueError(f"recompute modules must be among {', '.join(RECOMPUTE_MODULES)}, not {sorted(unknown)}")
        if self.recompute not in RECOMPUTE_POLICIES:
            raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE_POLICIES)}, not {self.recompute!r}")
        if self.sequence_parallel and not self.tensor_parallel:
            raise ValueError("sequence parallelism runs on the tensor-parallel group: enable tensor parallelism too")
        if self.interleaved and not self.pipeline:
            raise ValueError("the interleaved schedule is a pipeline schedule: enable the pipeline too")
        if self.stage not in ("first", "last", "middle"):
            raise ValueError(f"stage must be first, last or middle, not {self.stage!r}")
        if self.stage == "middle" and not self.uneven_stages:
            raise ValueError("the middle stage is accounted with uneven stages only (even ones: the first dominates)")
        if self.uneven_stages and not self.pipeline:
            raise ValueError("uneven stages are pipeline stages: enable the pipeline too")
        if self.dtype not in FLOAT_ACTIVATION_DTYPES:
            raise ValueError(f"activation dtype must be one of {', '.join(FLOAT_ACTIVATION_DTYPES)}")

    def shard(self, inventory: Inventory) -> Inventory:
        """The dtype and the TP/SP sharding of this strategy, without recompute
        (what the output side — final norm, logits, loss — is subject to),
        and the context-parallel split of the sequence when on."""
        if self.moe_dispatcher == "alltoall":
            inventory = megatron_alltoall_dispatch(inventory, self.pad_to_capacity)
        if self.context_parallel:
            inventory = context_parallel(inventory)
        inventory = self.dispatch(inventory)
        if self.dtype != "bf16":
            inventory = activation_dtype(inventory, self.dtype)
        if self.fp8_gemm_inputs:
            inventory = fp8_gemm_inputs(inventory)
        if self.tensor_parallel:
            inventory = tensor_parallel(inventory)
        if self.sequence_parallel:
            inventory = sequence_parallel(inventory, gathered=self.sp_inputs == "gathered")
        return inventory

    def dispatch(self, inventory: Inventory) -> Inventory:
        """The routed-expert terms of ``inventory`` after this strategy's dispatch
        (:func:`expert_dispatch`); an inventory without them is returned as is."""
        if not any(x.split is Axis.EXPERT for x in inventory):
            return inventory
        tensor_ways = t if self.tensor_parallel else Integer(1)
        return expert_dispatch(inventory, e if self.expert_parallel else Integer(1),
                               e_t if self.expert_tensor_parallel else tensor_ways, tensor_ways,
                               C_f if self.expert_capacity else Integer(1))

    def apply(self, inventory: Inventory) -> Inventory:
        """The per-layer inventory one GPU holds under this strategy."""
        inventory = self.shard(inventory)
        if self.fused_swiglu:
            inventory = fused_expert_activation(inventory)
        if self.recompute == "selective":
            modules = self.modules()
            if "core_attn" in modules:
                inventory = selective_recompute(inventory)
            if "moe_act" in modules:
                inventory = expert_activation_recompute(inventory)
            if "layernorm" in modules:
                inventory = norm_recompute(inventory, self.dtype)
            if "mla_up_proj" in modules:
                inventory = mla_up_proj_recompute(inventory, self.sequence_parallel)
        elif self.recompute == "full":
            inventory = full_recompute(inventory, self.dtype)
        elif self.recompute == OP_SAC:
            from .op_sac import op_selective_checkpoint
            if self.layer_matmuls is None:
                raise ValueError("op-sac counts the layer's matmuls: build the strategy with layer_matmuls")
            inventory = op_selective_checkpoint(inventory, full_recompute(inventory, self.dtype), self.layer_matmuls,
                                                t if self.tensor_parallel else 1, self.sequence_parallel, self.dtype)
        return inventory

    def modules(self) -> tuple:
        """The modules selective recompute recomputes (Megatron-Core's default: the attention core)."""
        return self.recompute_modules or ("core_attn",)

    def layers_held(self) -> tuple[Expr, Expr]:
        """(micro-batch chunks in flight, layers per chunk) on the stage accounted.

        Without a pipeline: one micro-batch over all L layers. First stage of
        1F1B: ``m`` micro-batches (p by default) of L/p layers — Korthikanti
        §4.2.3's "p micro-batches in flight" make it L layers' worth (Eq 5).
        Interleaved: :func:`interleave_in_flight` chunks of L/(p v) layers.
        Uneven stages: the first stage's L_1 (the last stage's L_p, a middle stage's L_m) layers
        replace L/p (its chunks hold L_1/v, L_p/v, L_m/v each); the in-flight count is the
        schedule's, whatever the layers (Megatron-Core's schedules do not depend on them): on the
        middle stage rank 1's, p − 1 under 1F1B.
        """
        if not self.pipeline:
            return Integer(1), L
        stage = self.stage_layers()
        # the schedule's own count: rank 0's, or rank 1's on the middle stage (1F1B: p − r in flight)
        rank = 1 if self.stage == "middle" else 0
        if self.interleaved:
            return (interleave_in_flight(p, v, rank) if self.in_flight is None else self.in_flight), stage / v
        return (p - rank if self.in_flight is None else self.in_flight), stage

    def stage_layers(self) -> Expr:
        """Transformer layers on the stage accounted: L/p when the stages are
        even; with uneven stages (Megatron-Core's first/last-stage layer counts)
        the first stage's L_1 or the last stage's L_p."""
        if not self.uneven_stages:
            return L / p
        return {"first": L_1, "middle": L_m, "last": L_p}[self.stage]

    def describe(self) -> str:
        parts = []
        if self.tensor_parallel:
            parts.append("TP" + ("+SP" + (" (linear inputs all-gathered, DTensor)" if self.sp_inputs == "gathered"
                                          else "") if self.sequence_parallel else ""))
        if self.context_parallel:
            parts.append("context parallel (s/c per rank)")
        if self.expert_parallel or self.expert_tensor_parallel:
            parts.append("experts split " + "×".join(
                n for n, on in (("e", self.expert_parallel), ("e_t", self.expert_tensor_parallel)) if on) + " ways")
        if self.expert_capacity:
            parts.append("busiest expert C_f × the balanced share")
        parts.append({"none": "no recompute", "selective": "selective recompute", "full": "full recompute",
                      OP_SAC: "torchtitan's per-op selective checkpointing (every other matmul's output, the "
                              "attention kernel's, the reduce-scatters' kept)"}[self.recompute]
                     + (f" ({', '.join(self.recompute_modules)})" if self.recompute_modules else ""))
        if self.fused_swiglu:
            parts.append("fused expert SwiGLU")
        if self.moe_dispatcher == "alltoall":
            parts.append("Megatron-Core alltoall dispatcher" + (", experts padded to capacity"
                                                                if self.pad_to_capacity else ""))
        parts.append(f"{self.dtype} activations ({DTYPE_BYTES[self.dtype]} B/elem), 1 B masks")
        if self.fp8_gemm_inputs:
            parts.append("linear layers' saved inputs in FP8")
        if self.pipeline:
            parts.append(f"{self.stage} pipeline stage"
                         + (f" ({self.stage_layers()} layers, uneven stages)" if self.uneven_stages else "")
                         + (", interleaved" if self.interleaved else ", 1F1B"))
        return ", ".join(parts)

