"""Communication: every collective a layout issues in one iteration, as terms.

The fifth ledger. Each term is a :class:`Collective`: its name, the parallel
group it runs over (``t``, ``c``, ``ep``, ``d``, ``p``), the collective, the
bytes of one call in the papers' letters, and the calls one GPU makes per
iteration. The terms are derived from the same inventories and strategies as
the memory ledgers — the layer's blocks from its matmuls, the K/V width from its
saved tensors, ZeRO-3's gathers from its parameters, the byte widths from the
activation dtype and the model-state recipe — never typed in as totals.

Conventions. ``bytes`` is the size of the whole buffer of one call: the tensor
an all-reduce reduces, the output of an all-gather, the input of a
reduce-scatter, the message of a send/recv, the buffer of an all-to-all. What
one rank sends over a ring of ``n`` ranks (:func:`ring_factor`) is then
2(n−1)/n × bytes for an all-reduce (reduce-scatter then all-gather), (n−1)/n ×
bytes for an all-gather, reduce-scatter or all-to-all, and the message for a
send/recv. The ZeRO paper's *volume* (§7) counts an all-reduce as 2× its
buffer and a gather or scatter as 1×, without the (n−1)/n (:func:`volume`).

Calls per iteration use M = B/(b·d) micro-batches per pipeline (Narayanan et
al. 2021 §3: global batch B, micro-batch b, data-parallel size d) and the L/p
layers a GPU holds.
"""
from __future__ import annotations

from dataclasses import dataclass

from sympy import Add, Expr, Integer

from ..core.dims import B, L, Psi, b, c, d, e, h, k, p, s, t, v
from ..core.tensors import DTYPE_BYTES, Group, Inventory

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv")
#: The parallel groups in Megatron-LM's rank order, innermost first (``parallel_state``'s
#: default order "tp-cp-ep-dp-pp"): t is contiguous, then c, then ep, then d, then p.
GROUPS = ("t", "c", "ep", "d", "p")
#: Phases of a step a collective belongs to (the time model overlaps by phase).
PHASES = ("forward", "backward", "recompute", "optimizer")

NARAYANAN = "Narayanan et al. 2021 (arXiv 2104.04473) §3"
KORTHIKANTI_SP = "Korthikanti et al. 2022 (arXiv 2205.05198) §4.2.2"
ZERO = "Rajbhandari et al. 2019 (ZeRO, arXiv 1910.02054) §7"
MEGATRON_DDP = "Megatron-LM distributed optimizer / DDP (megatron/core/distributed)"
RING_ATTENTION = "Liu et al. 2023 (ring attention, arXiv 2310.01889); Megatron-LM context parallelism"
MEGATRON_PP = "Narayanan et al. 2021 §4.1 (scatter/gather of the stage boundary over t)"
EXPERT_A2A = "Lepikhin et al. 2020 (GShard) §2; Megatron-LM MoE all-to-all token dispatcher"

#: Micro-batches per pipeline per iteration (Narayanan §3's m = B/(b·d)).
MICRO_BATCHES = B / (b * d)


@dataclass(frozen=True)
class Collective:
    """One collective of the iteration.

    group: which parallel group it runs over (:data:`GROUPS`); size: that group's
    ranks as an expression (``d·c`` for the data-parallel reduce under context
    parallelism). collective: one of :data:`COLLECTIVES`. bytes: one call's
    buffer (module docstring). calls: how many such calls one GPU makes per
    iteration. phase: :data:`PHASES`. overlap: what the time model may hide it
    behind (``none``, ``gemm``, ``attention``, ``forward``, ``backward``).
    """

    name: str
    group: str
    size: Expr
    collective: str
    bytes: Expr
    calls: Expr
    phase: str
    overlap: str
    source: str
    note: str = ""

    def __post_init__(self) -> None:
        if self.group not in GROUPS:
            raise ValueError(f"{self.name}: group must be one of {GROUPS}, not {self.group!r}")
        if self.collective not in COLLECTIVES:
            raise ValueError(f"{self.name}: collective must be one of {COLLECTIVES}, not {self.collective!r}")
        if self.phase not in PHASES:
            raise ValueError(f"{self.name}: phase must be one of {PHASES}, not {self.phase!r}")

    @property
    def ring_factor(self) -> Expr:
        return ring_factor(self.collective, self.size)

    @property
    def traffic(self) -> Expr:
        """Bytes one rank sends per iteration over a ring: calls × ring factor × bytes."""
        return self.calls * self.ring_factor * self.bytes

    @property
    def volume(self) -> Expr:
        """ZeRO §7's data movement per iteration: calls × bytes × (2 for an all-reduce, else 1)."""
        return self.calls * self.bytes * (2 if self.collective == "all-reduce" else 1)


def ring_factor(collective: str, n) -> Expr:
    """Share of one call's buffer a rank sends on a ring of ``n`` ranks
    (Patarasuk & Yuan 2009; NCCL's ring algorithms): all-reduce 2(n−1)/n —
    a reduce-scatter then an all-gather, n−1 steps each of 1/n of the buffer;
    all-gather, reduce-scatter, all-to-all (n−1)/n; send/recv 1."""
    n = Integer(n) if isinstance(n, int) else n
    if collective == "all-reduce":
        return 2 * (n - 1) / n
    if collective in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n
    if collective == "send-recv":
        return Integer(1)
    raise ValueError(f"collective must be one of {COLLECTIVES}, not {collective!r}")


def ring_steps(collective: str, n):
    """Steps of the ring algorithm (NCCL ``tuning.cc``: nsteps): 2(n−1) for an
    all-reduce, n−1 for a gather, scatter or all-to-all, 1 for a send/recv."""
    if collective == "all-reduce":
        return 2 * (n - 1)
    if collective == "send-recv":
        return 1 + 0 * n
    return n - 1


# --- what the terms are derived from ----------------------------------------

def layer_blocks(matmuls: Inventory) -> list[str]:
    """The blocks of a layer that tensor parallelism splits: the distinct
    ``layer/<block>/...`` of its weight matmuls (attention, mlp or moe).
    Megatron-LM splits each block as a column-parallel matmul followed by a
    row-parallel one (Narayanan §3.1, Shoeybi et al. 2019 §3), so each block
    has one ``g`` (forward all-reduce of its output) and one ``f`` (backward
    all-reduce of its input gradient)."""
    blocks = []
    for mm in matmuls:
        if mm.scope == "layer" and mm.weight:
            block = mm.name.split("/")[1]
            if block not in blocks:
                blocks.append(block)
    return blocks


def moe_share(matmuls: Inventory) -> Expr:
    """Share of the layers that are MoE layers: the router's repeat (``batch``) — 1 when every layer
    routes, (L − L_d)/L with L_d dense layers first (DeepSeek's ``first_k_dense_replace``); 0 for a
    dense model."""
    for mm in matmuls:
        if mm.name == "layer/moe/router":
            return mm.batch
    return Integer(0)


def kv_width(saved: Inventory) -> Expr:
    """Elements per token of one of K or V: the saved key's elements / (s·b)
    (h with multi-head attention, g·h/a with grouped-query attention)."""
    key = saved["attention/key"]
    return key.elements / (s * b)


def modules(parameters: Inventory) -> dict[str, tuple[str, Expr]]:
    """Parameters grouped by the module that owns them (``layer/mlp/fc1_weight`` and
    ``_bias`` → ``layer/mlp/fc1``): ZeRO-3 gathers one module's parameters per call
    (DeepSpeed's ``all_gather_coalesced`` per submodule). Value: (scope, count)."""
    out: dict[str, tuple[str, Expr]] = {}
    for term in parameters:
        stem = term.name
        for suffix in ("_weight", "_bias"):
            if stem.endswith(suffix):
                stem = stem[: -len(suffix)]
        scope, count = out.get(stem, (term.scope, Integer(0)))
        out[stem] = (scope, count + term.count)
    return out


# --- the terms ---------------------------------------------------------------

def terms(parameters: Inventory, saved: Inventory, matmuls: Inventory, *, tensor_parallel: bool = True,
          sequence_parallel: bool = False, recompute: str = "none", zero: int = 0, pipeline: bool = False,
          interleaved: bool = False, context_parallel: bool = False, expert_parallel: bool = False,
          dtype: str = "bf16", grad_bytes: int = 2, param_bytes: int = 2, tied: bool = True,
          scatter_gather: bool = True, gather_bytes: int | None = None) -> tuple[Collective, ...]:
    """Every collective of one iteration under a layout, per GPU.

    ``grad_bytes``/``param_bytes``: bytes per gradient and per weight, from the
    model-state recipe. ``gather_bytes``: bytes per weight of the copy ZeRO-3 gathers before use
    (None: ``param_bytes``) — the working copy, bf16 cast from fp32 parameters under FSDP's mixed
    precision (``Recipe.working_bytes``), where ZeRO-1/2 gather the stored weights after the step.
    ``tied``: the word embedding doubles as the output layer (with a pipeline its gradient is
    all-reduced between the first and last stage). ``scatter_gather``: the stage boundary is sent as t slices and
    all-gathered on the receiver (Narayanan §4.1; Megatron-LM's default).
    ``expert_parallel``: the hook for the MoE token dispatcher over ``e`` ranks.
    A group of one rank moves nothing (every ring factor has n − 1).
    """
    act = DTYPE_BYTES[dtype]
    gathered = param_bytes if gather_bytes is None else gather_bytes
    tokens = s / c if context_parallel else s            # each context-parallel rank holds s/c tokens
    boundary = b * tokens * h * act                       # one micro-batch's hidden states at a block boundary
    layers = L / p
    per_micro_batch = layers * MICRO_BATCHES              # per layer per micro-batch → per iteration
    out: list[Collective] = []

    def add(*args, **kw):
        out.append(Collective(*args, **kw))

    # Tensor parallelism: per block, g (forward) and f (backward) — all-reduces, or under SP
    # all-gather + reduce-scatter with the same volume (Korthikanti §4.2.2). Full recompute re-runs
    # the forward, and with it the forward collectives; selective recompute re-runs only the
    # attention core (Q·Kᵀ, softmax, ·V), which sits inside the heads and communicates nothing.
    # torchtitan's per-op policy (op-sac) re-runs the block's forward too, but keeps the reduce-scatters'
    # outputs (in its save list): the all-gathers (SP) or the all-reduces (no SP) run again, the
    # reduce-scatters do not (layout/op_sac.py).
    if tensor_parallel:
        forward_phases = ["forward"] + (["recompute"] if recompute in ("full", "op-sac") else [])
        for block in layer_blocks(matmuls):
            for phase in forward_phases:
                if sequence_parallel:
                    add(f"tp/{block}/{phase}_all_gather", "t", t, "all-gather", boundary, per_micro_batch, phase,
                        "gemm", KORTHIKANTI_SP, "g: gather the sequence-sharded input before the column-parallel matmul")
                    if phase == "recompute" and recompute == "op-sac":
                        continue
                    add(f"tp/{block}/{phase}_reduce_scatter", "t", t, "reduce-scatter", boundary, per_micro_batch,
                        phase, "gemm", KORTHIKANTI_SP, "ḡ: reduce the row-parallel output, scatter it along s")
                else:
                    add(f"tp/{block}/{phase}_all_reduce", "t", t, "all-reduce", boundary, per_micro_batch, phase,
                        "gemm", NARAYANAN, "g: sum the row-parallel matmul's partial outputs")
            if sequence_parallel:
                add(f"tp/{block}/backward_all_gather", "t", t, "all-gather", boundary, per_micro_batch, "backward",
                    "gemm", KORTHIKANTI_SP, "conjugate of ḡ: gather the output gradient")
                add(f"tp/{block}/backward_reduce_scatter", "t", t, "reduce-scatter", boundary, per_micro_batch,
                    "backward", "gemm", KORTHIKANTI_SP, "conjugate of g: reduce-scatter the input gradient")
                add(f"tp/{block}/backward_input_regather", "t", t, "all-gather", boundary, per_micro_batch,
                    "backward", "gemm", "Megatron-LM LinearWithGradAccumulationAndAsyncCommunication (SP)",
                    "the column-parallel input is saved sequence-sharded and re-gathered for the weight gradient, "
                    "overlapped with the input-gradient matmul; not part of Korthikanti's g/ḡ count")
            else:
                add(f"tp/{block}/backward_all_reduce", "t", t, "all-reduce", boundary, per_micro_batch, "backward",
                    "gemm", NARAYANAN, "f: sum the column-parallel matmul's input gradients")

    # Context parallelism: ring attention passes each rank's K and V around the c ranks —
    # c − 1 steps per layer in forward; in backward K, V and their gradients go round again.
    if context_parallel:
        kv = 2 * b * tokens * kv_width(saved) * act / (t if tensor_parallel else 1)
        steps = (c - 1) * per_micro_batch
        add("cp/forward_kv_exchange", "c", c, "send-recv", kv, steps, "forward", "attention", RING_ATTENTION,
            "K and V of s/c tokens, c − 1 ring steps per layer, overlapped with the attention of the block held")
        if recompute == "full":
            add("cp/recompute_kv_exchange", "c", c, "send-recv", kv, steps, "recompute", "attention", RING_ATTENTION)
        add("cp/backward_kv_exchange", "c", c, "send-recv", kv, steps, "backward", "attention", RING_ATTENTION)
        add("cp/backward_dkv_exchange", "c", c, "send-recv", kv, steps, "backward", "attention", RING_ATTENTION,
            "the K, V gradients travel the ring back to their owners")

    # Expert parallelism: the MoE token dispatcher's all-to-alls over the e expert-parallel ranks —
    # dispatch and combine in forward, their gradients (combine's then dispatch's) in backward, and
    # the forward pair again under full recompute. A rank routes its b·(s/c) tokens (÷t under SP:
    # Megatron-Core's MoE layer takes the sequence-sharded input) to k experts each, h elements a
    # row in the activation dtype; only the MoE layers dispatch (the router's repeat, ``moe_share``).
    if expert_parallel and moe_share(matmuls) != 0:
        routed = b * tokens * k * h * act / (t if sequence_parallel and tensor_parallel else 1)
        moe_layers = per_micro_batch * moe_share(matmuls)
        for phase in ("forward", "backward") + (("recompute",) if recompute == "full" else ()):
            for what in ("dispatch", "combine"):
                add(f"ep/{phase}_{what}_all_to_all", "ep", e, "all-to-all", routed, moe_layers, phase, "none",
                    EXPERT_A2A, "balanced routing: each rank sends (e−1)/e of its routed rows")

    # Pipeline parallelism: one send of the stage boundary per micro-batch and model chunk in
    # forward and one of its gradient in backward (interleaved: v chunks, v times the sends).
    if pipeline:
        sliced = scatter_gather or sequence_parallel
        message = boundary / t if (tensor_parallel and sliced) else boundary
        chunks = v if interleaved else Integer(1)
        for phase in ("forward", "backward"):
            add(f"pp/{phase}_send", "p", p, "send-recv", message, chunks * MICRO_BATCHES, phase, "none", NARAYANAN,
                ("boundary activations" if phase == "forward" else "boundary gradients")
                + ("; t slices of 1/t each (scatter/gather)" if tensor_parallel and sliced else ""))
            if tensor_parallel and scatter_gather and not sequence_parallel:
                add(f"pp/{phase}_boundary_all_gather", "t", t, "all-gather", boundary, chunks * MICRO_BATCHES,
                    phase, "none", MEGATRON_PP, "the receiver reassembles the t slices over NVLink")
        if tied:
            word = parameters["embedding/word"].count
            add("pp/embedding_gradient_all_reduce", "p", Integer(2), "all-reduce", word * grad_bytes / t, 1,
                "optimizer", "none", "Narayanan et al. 2021 §5.1; Megatron-LM _allreduce_word_embedding_grads",
                "the tied word embedding lives on the first and the last stage: their gradients are summed")

    # Data parallelism (with context parallelism the gradient reduce spans d·c ranks, as the
    # distributed optimizer does). Each GPU holds Ψ/(t·p) of the weights.
    shard = Psi / (t * p)
    group_size = d * c if context_parallel else d
    if zero == 0:
        add("dp/gradient_all_reduce", "d", group_size, "all-reduce", shard * grad_bytes, 1, "backward", "backward",
            ZERO, "once per iteration, after the last micro-batch's backward (bucketed)")
    elif zero in (1, 2):
        add("dp/gradient_reduce_scatter", "d", group_size, "reduce-scatter", shard * grad_bytes,
            1 if zero == 1 else MICRO_BATCHES, "backward", "backward", ZERO,
            "ZeRO-1 / distributed optimizer: once per iteration" if zero == 1 else
            "ZeRO-2: every micro-batch (the gradients are partitioned, not accumulated whole)")
        add("dp/parameter_all_gather", "d", group_size, "all-gather", shard * param_bytes, 1, "optimizer", "forward",
            MEGATRON_DDP, "the updated weight shards gathered after the step (overlappable with the next forward)")
    elif zero == 3:
        # Each module's share of Ψ (its count over the inventory's total), so the gathers sum to Ψ
        # exactly — also when Ψ is a hand-filled N.
        owned = modules(parameters)
        total = Add(*((L if scope == "layer" else 1) * count for scope, count in owned.values()))
        # op-sac is torchtitan's, under FSDP2: fully_shard wraps the checkpointed block, so the recompute runs
        # inside the block's backward on the weights its pre-backward hook gathered — no gather of its own
        passes = [("forward", "forward")] + ([("recompute", "backward")] if recompute == "full" else [])
        passes.append(("backward", "backward"))
        for module, (scope, count) in owned.items():
            # A module is split t ways, not p ways: p splits the layers. Per GPU, averaged over the
            # stages, a layer module is gathered L/p times per micro-batch and any other module 1/p times.
            calls = MICRO_BATCHES * (layers if scope == "layer" else 1 / p)
            share = Psi * count / total
            for phase, window in passes:
                add(f"zero3/{module}/{phase}_all_gather", "d", group_size, "all-gather", share * gathered / t,
                    calls, phase, window, ZERO, "parameters gathered before use, every micro-batch (prefetched)")
            add(f"zero3/{module}/gradient_reduce_scatter", "d", group_size, "reduce-scatter", share * grad_bytes / t,
                calls, "backward", "backward", ZERO)
    else:
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, not {zero!r}")
    return tuple(out)


def traffic(collectives, select=None) -> Expr:
    """Bytes one rank sends per iteration over the terms whose names start with ``select``."""
    return Add(*(x.traffic for x in collectives if select is None or x.name.startswith(select)))


def volume(collectives, select=None) -> Expr:
    """ZeRO §7's volume (an all-reduce counts 2× its buffer) over the selected terms."""
    return Add(*(x.volume for x in collectives if select is None or x.name.startswith(select)))


def group_attention_core(matmuls: Inventory) -> Inventory:
    """The attention-core matmuls (what context parallelism overlaps its ring with)."""
    return type(matmuls)(tuple(mm for mm in matmuls if mm.group is Group.ATTENTION_CORE))


__all__ = ["Collective", "terms", "traffic", "volume", "ring_factor", "ring_steps", "layer_blocks", "kv_width",
           "modules", "moe_share", "MICRO_BATCHES", "COLLECTIVES", "GROUPS"]
