"""The memory of one training step, instant by instant.

Seed 004 §02–§03: what decides an OOM is what is alive *at the same
instant*, not the size of each ledger. Memory is split into four lifetime
classes (seed 004 §02):

``constant``
    weights, gradients and optimizer states: allocated once, alive across
    steps; sharded by TP/PP (first order, even split) and ZeRO over d.
``activations``
    tensors autograd saves in forward and releases in backward, layer by
    layer (the strategy's per-layer inventory), and the *recompute window*:
    the intermediates recompute re-creates for the layer being
    back-propagated (seed 004 §03.1, §06.3).
``transients``
    per-kernel work tensors: the raw Q·Kᵀ scores of a layer's forward, the
    MLP and attention backward work tensors (gradients of the
    intermediates and the boundary gradients dY, dX), the logits and the
    fp32 cross-entropy tensors, the optimizer-step temporaries.
``communication``
    NCCL staging buffers and gradient buckets, sized from named settings
    (:class:`CommSettings`), allocated at start-up and held.

The step is a sequence of phases: forward of each layer, the loss, backward
of each layer (split into its MLP and its attention half, the two windows of
different work tensors), the optimizer step. On a pipeline stage the
timeline is that of the micro-batch that fills the stage: ``k - 1`` earlier
micro-batch chunks are held whole while it runs (1F1B: ``k = min(m, p)`` on
the first stage, Korthikanti §4.2.3; interleaved: Narayanan §2.2.2). The
loss is computed on the last stage, so a pipelined first stage has no loss
phase.

The peak is the maximum over instants of the sum of what is alive — never
the sum of the classes' maxima (seed 004 §03.1). Every phase family is a
sum of terms whose multiplicity grows with the layer index ``i`` (forward:
layers 1..i saved; backward: layers 1..i still saved), so each family
peaks at its last-computed end, ``i = n``; the candidates are those ends
and the peak expression is their ``Max``. :meth:`Timeline.evaluate` walks
every instant at one configuration and returns the peak value and the
phase ``t*`` where it occurs — recompute moves it (seed 004 §03.1).

Conditions: the model's layer inventory (``symbolic.bill.derive.inventories``: the
GPT layer of Korthikanti §4.1, without FlashAttention unless the
``flash_attention`` option; the LLaMA and MoE layers with their fused
attention kernel), work tensors from that layer's saved tensors
(:func:`layer_work_tensors`), transformer layers only for activations (the
embedding output and final norm are left out, as in the bill), 2 B floats
for activations and work tensors unless the strategy's dtype says otherwise.
Sizes of the work tensors follow from shapes; how many of them a real kernel
keeps at once is a modelling choice stated at each term.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterator

from sympy import Add, Expr, Integer, Max, Symbol, ceiling, expand, sympify

from ..core.dims import L, L_1, V, a, b, h, p, s, v
from ..core.dims import k as top_k  # experts per token; `k` below is the chunks in flight
from ..core.dims import C_f, c
from ..core.dims import t as tensor_ways  # the tensor-parallel letter (the EP staging's rows under SP)
from ..core.numeric import exact_int
from ..core.tensors import Axis, Group, Inventory, SavedTensor
from ..layout.experts import expert_data_parallel, expert_tensor_parallel
from ..layout.layout import Layout
from ..layout.strategies import Strategy, interleave_in_flight, sequence_parallel, tensor_parallel
from ..ledgers import params as params_ledger
from ..ledgers import states
from ..models.config import ConfigError, ModelConfig

CLASSES = ("constant", "activations", "transients", "communication")

#: The layer index inside the chunk being run; a local symbol, not a dimension.
i = Symbol("i", positive=True, integer=True)

MiB = 2**20
SEED = "seed 004"
TRANSIENT_SOURCE = "seed 004 §02.3, §06.3 (work tensors); shapes as Korthikanti §4.1"


# --- settings ----------------------------------------------------------------

@dataclass(frozen=True)
class CommSettings:
    """Communication buffers, from named settings (seed 004 §02.4, §05.4).

    nccl_buffsize: ``NCCL_BUFFSIZE``, the Simple-protocol staging per channel
    (NCCL's default, 4 MiB). channels: NCCL channels per communicator (NCCL
    chooses it per topology; 16 is an assumed typical value, not a seed
    number). A communicator is counted for every parallel group wider than
    one (TP, DP, PP send/recv). bucket_bytes: one gradient bucket staged for
    the data-parallel all-reduce (PyTorch DDP's default ``bucket_cap_mb`` =
    25 MiB), counted when d > 1.
    """

    nccl_buffsize: int = 4 * MiB
    channels: int = 16
    bucket_bytes: int = 25 * MiB

    def items(self, layout: Layout) -> list[tuple[str, int]]:
        per_communicator = self.nccl_buffsize * self.channels
        out = []
        for group, size in (("tensor-parallel", layout.tp), ("data-parallel", layout.dp),
                            ("pipeline send/recv", layout.pp)) + expert_groups(layout):
            if size > 1:
                out.append((f"communication/nccl staging ({group})", per_communicator))
        if layout.dp > 1 and self.bucket_bytes:
            out.append(("communication/gradient bucket (data-parallel)", self.bucket_bytes))
        return out


def expert_groups(layout: Layout) -> tuple[tuple[str, int], ...]:
    """The expert grid's communicators beside the dense grid's (Megatron-Core's
    parallel_state builds them apart): the expert-parallel group (the dispatch
    and combine all-to-all, seed 004 §05.4's EP staging), the expert
    tensor-parallel group when e_t ≠ t, and the expert-data-parallel group (the
    experts' gradient reduce) when it differs from the data-parallel one."""
    if layout.ep == 1 and layout.etp in (0, layout.tp):
        return ()
    etp = expert_tensor_parallel(layout)
    edp = expert_data_parallel(layout)
    return ((("expert-parallel all-to-all", layout.ep),)
            + ((("expert tensor-parallel", etp),) if etp != layout.tp else ())
            + ((("expert data-parallel", edp),) if edp != layout.dp else ()))


#: DeepSeek-V3's FP8 tiles (arXiv 2412.19437 §3.3.2 "Fine-Grained Quantization"): one fp32 scale for
#: every 1×128 tile of an activation row, 4 B per 128 elements.
FP8_TILE = 128


def expert_all_to_all_staging(model: ModelConfig, layout: Layout,
                              fp8_tile: int = FP8_TILE) -> list[tuple[str, Expr]]:
    """The expert-parallel all-to-all's send and receive buffers, allocated once
    and kept (seed 004 §02.4, §05.4: "每卡每方向 EP all-to-all staging"), sized
    from the layout, worst case: every row a rank dispatches or combines.

    Rows: the rank's own tokens, s·b/c (÷t under SP: each TP rank dispatches
    its sequence shard, Megatron-Core's ``MoEAlltoAllTokenDispatcher``), once
    per chosen expert — ×k; the receive side ×C_f, the busiest rank's share.
    Row width: h elements. The dispatch (forward) moves them in bf16, or in
    FP8 with ``--fp8-activations`` — the experts' input is quantised before
    the dispatch (DeepSeek-V3 §3.3.3 "Low-Precision Communication") — at 1 B
    plus one fp32 scale per ``fp8_tile`` elements (0: per-tensor scaling, the
    scale not counted). The combine (forward) returns the experts' outputs in
    bf16 (§3.3.3 keeps it in BF16). The backward all-to-alls — the combine's
    gradient dispatched, the dispatch's gradient combined, both bf16 — have
    the combine's rows and width in the opposite roles, and reuse its buffers
    (counted once). Condition: one micro-batch's all-to-all in flight (no
    overlap of two micro-batches' dispatches); rows for a rank's own local
    experts counted too (the (e−1)/e that crosses the network is an upper bound
    of e/(e−1) = 1.6% at e = 64). Empty without expert parallelism.
    """
    if not model.experts or layout.ep == 1:
        return []
    return all_to_all_staging(layout.sp, layout.cp > 1, layout.moe_capacity != 1, layout.fp8_activations, fp8_tile)


def all_to_all_staging(sequence_parallel: bool = False, context_parallel: bool = False, capacity: bool = False,
                       fp8: bool = False, fp8_tile: int = FP8_TILE) -> list[tuple[str, Expr]]:
    """:func:`expert_all_to_all_staging` by the layout's switches: SP (÷t),
    CP (÷c), a capacity factor (C_f on the receive side), FP8 dispatch."""
    tokens = s * b / (c if context_parallel else 1) / (tensor_ways if sequence_parallel else 1)
    sent, received = tokens * top_k, tokens * top_k * (C_f if capacity else 1)
    if fp8:
        dispatch_row = h + (4 * h / fp8_tile if fp8_tile else 0)
        dispatch = "fp8" + (f" + fp32 scale per 1×{fp8_tile} tile" if fp8_tile else "")
    else:
        dispatch_row, dispatch = 2 * h, "bf16"
    name = "communication/EP all-to-all staging"
    return [(f"{name}, dispatch send ({dispatch})", sent * dispatch_row),
            (f"{name}, dispatch receive ({dispatch})", received * dispatch_row),
            (f"{name}, combine send (bf16; backward reuses it)", received * 2 * h),
            (f"{name}, combine receive (bf16; backward reuses it)", sent * 2 * h)]


@dataclass(frozen=True)
class MemoryOptions:
    """What the timeline is built under, beyond the layout (seed 004 §05).

    recipe_override: a model-state :class:`~symbolic.ledgers.states.Recipe`
    replacing the layout's (FP8 weights / optimizer states). flash_attention:
    the fused attention kernel — no (b, a, s, s) tensor reaches HBM; it saves
    the log-sum-exp instead. fused_cross_entropy: logits and loss in one
    kernel, streamed by row — no fp32 logits. activation_offload: saved
    activations leave the GPU, a double buffer (two layers) stays.
    optimizer_offload: the optimizer blocks live in CPU memory.
    comm: the communication buffer settings.
    """

    recipe_override: states.Recipe | None = None
    flash_attention: bool = False
    fused_cross_entropy: bool = False
    activation_offload: bool = False
    optimizer_offload: bool = False
    comm: CommSettings = CommSettings()
    applied: tuple[str, ...] = ()


# --- terms -------------------------------------------------------------------

@dataclass(frozen=True)
class Item:
    """What is alive in one instant: ``copies`` copies of a tensor set.

    ``tensors`` are (name, bytes) pairs of one copy; ``group`` and ``first``
    give each copy a stable identity (copy ``first``, ``first + 1``, ...)
    so that consecutive instants can tell which tensors were allocated and
    which freed (see :meth:`Timeline.allocation_events`).
    """

    cls: str
    name: str
    tensors: tuple[tuple[str, Expr], ...]
    copies: Expr = Integer(1)
    group: str = ""
    first: Expr = Integer(1)

    @property
    def bytes(self) -> Expr:
        return self.copies * Add(*(size for _, size in self.tensors))


@dataclass(frozen=True)
class PhaseFamily:
    """A phase repeated over the layers of a chunk (``indexed``) or once.

    ``order``: ``+1`` walks i = 1..n (forward), ``-1`` walks n..1 (backward).
    Consecutive families with the same ``loop`` are walked together, layer
    by layer (the MLP half then the attention half of each backward layer).
    """

    name: str
    items: tuple[Item, ...]
    indexed: bool = False
    order: int = 1
    loop: str = ""

    def label(self, index: int | None = None) -> str:
        return self.name.replace("{i}", str(index)) if self.indexed else self.name

    def total(self) -> Expr:
        return Add(*(item.bytes for item in self.items))

    def by_class(self) -> dict[str, Expr]:
        out = {cls: Integer(0) for cls in CLASSES}
        for item in self.items:
            out[item.cls] += item.bytes
        return out


def _bytes(terms: Inventory) -> tuple[tuple[str, Expr], ...]:
    return tuple((term.name, term.bytes) for term in terms)


def _tensor(name, shape, dtype, split, split_dim, note=""):
    return SavedTensor(name, shape, dtype, split, split_dim, Group.BODY, TRANSIENT_SOURCE, note)


def work_tensors(ffn: Expr) -> Inventory:
    """The kernel work tensors of one layer and of the loss, unsharded.

    Forward: ``attention/scores`` — the raw Q·Kᵀ (b, a, s, s), the softmax's
    input, freed once the softmax output exists. MLP backward: the incoming
    gradient dY and outgoing dX (s, b, h), and the gradients of the two
    f-wide intermediates (GeLU output and input) — "与它同形状的中间量梯度"
    (seed 004 §06.3). Attention backward: dY, dX, the gradients of the
    probabilities and of the scores (b, a, s, s each, no FlashAttention) and
    dQ, dK, dV. Loss: the logits (bf16, vocabulary split by t as Megatron's
    vocab-parallel cross-entropy does), their fp32 copy kept for the
    softmax and the fp32 gradient of the logits.
    """
    head = h / a
    return Inventory((
        _tensor("forward/attention/scores", (b, a, s, s), "bf16", Axis.TENSOR, 1, "Q·Kᵀ before the softmax"),
        _tensor("backward/mlp/grad_output", (s, b, h), "bf16", Axis.SEQUENCE, 0, "dY entering the MLP block"),
        _tensor("backward/mlp/grad_fc2_input", (s, b, ffn), "bf16", Axis.TENSOR, 2, "d(GeLU output)"),
        _tensor("backward/mlp/grad_gelu_input", (s, b, ffn), "bf16", Axis.TENSOR, 2, "d(GeLU input): dH"),
        _tensor("backward/mlp/grad_input", (s, b, h), "bf16", Axis.SEQUENCE, 0, "dX leaving the MLP block"),
        _tensor("backward/attention/grad_output", (s, b, h), "bf16", Axis.SEQUENCE, 0, "dY entering attention"),
        _tensor("backward/attention/grad_probs", (b, a, s, s), "bf16", Axis.TENSOR, 1, "dP"),
        _tensor("backward/attention/grad_scores", (b, a, s, s), "bf16", Axis.TENSOR, 1, "dS"),
        _tensor("backward/attention/grad_query", (s, b, a, head), "bf16", Axis.TENSOR, 2, "dQ"),
        _tensor("backward/attention/grad_key", (s, b, a, head), "bf16", Axis.TENSOR, 2, "dK"),
        _tensor("backward/attention/grad_value", (s, b, a, head), "bf16", Axis.TENSOR, 2, "dV"),
        _tensor("backward/attention/grad_input", (s, b, h), "bf16", Axis.SEQUENCE, 0, "dX leaving the layer"),
        _tensor("loss/logits", (s, b, V), "bf16", Axis.TENSOR, 2, "output layer result, vocabulary split by t"),
        _tensor("loss/logits_fp32", (s, b, V), "fp32", Axis.TENSOR, 2, "fp32 copy for the softmax, kept for backward"),
        _tensor("loss/grad_logits_fp32", (s, b, V), "fp32", Axis.TENSOR, 2, "d(loss)/d(logits), fp32"),
    ))


def layer_work_tensors(saved: Inventory) -> Inventory:
    """The kernel work tensors of one layer and of the loss, from the layer's
    saved tensors (any architecture), unsharded.

    The rule that gives :func:`work_tensors` for the GPT layer: the raw Q·Kᵀ
    scores in forward and dP, dS in backward only when the layer saves an
    s×s tensor (no fused kernel: a fused kernel keeps them in SRAM tiles);
    in the MLP backward, dY and dX and the gradient of every float
    intermediate of the MLP/MoE block that TP or EP splits and that is not
    h wide (GPT: the GeLU input and output; LLaMA: gate, SiLU, up and the
    down projection's input; MoE: each expert's and shared expert's
    intermediates, all experts at once — an upper bound, autograd frees
    each expert's once its backward is done), in reverse order of forward;
    in the attention backward dY, dX and dQ, dK, dV of the saved Q, K, V's
    shapes (GQA: K and V at g heads). The loss: as :func:`work_tensors`.

    A layer with routed experts also has the dispatch's forward buffers
    (Megatron-Core ``token_dispatcher.MoEAlltoAllTokenDispatcher``): the
    permuted tokens, each token once per chosen expert — [s·b·k, h], the
    rank's own tokens (/t under SP) — and, with expert parallelism, the
    all-to-all's output of the same size under balanced routing, both freed
    once the expert-TP all-gather has produced the experts' input. (The combine
    mirrors them on the way back; they are not counted twice.)
    """
    explicit = any(term.shape[-2:] == (s, s) for term in saved)
    hidden = (s, b, h)
    terms = []
    if explicit:
        terms.append(_tensor("forward/attention/scores", (b, a, s, s), "bf16", Axis.TENSOR, 1,
                             "Q·Kᵀ before the softmax"))
    if any(x.split is Axis.EXPERT for x in saved):
        terms += [_tensor(f"forward/moe/{name}", (s, b, top_k, h), "bf16", Axis.SEQUENCE, 0, note)
                  for name, note in (("permuted_tokens", "permute: each token once per chosen expert"),
                                     ("received_tokens", "the EP all-to-all's output (balanced: as many rows)"))]
    terms.append(_tensor("backward/mlp/grad_output", hidden, "bf16", Axis.SEQUENCE, 0, "dY entering the MLP block"))
    for x in reversed(saved.terms):
        if (not x.name.startswith("attention/") and x.dtype not in ("mask", "int64")
                and x.split in (Axis.TENSOR, Axis.EXPERT) and x.shape[-1] != h):
            name = x.name.split("/", 1)[1].replace("/", "_")
            terms.append(_tensor(f"backward/mlp/grad_{name}", x.shape, x.dtype, x.split, x.split_dim,
                                 f"d({x.name})"))
    terms.append(_tensor("backward/mlp/grad_input", hidden, "bf16", Axis.SEQUENCE, 0, "dX leaving the MLP block"))
    terms.append(_tensor("backward/attention/grad_output", hidden, "bf16", Axis.SEQUENCE, 0,
                         "dY entering attention"))
    if explicit:
        terms += [_tensor("backward/attention/grad_probs", (b, a, s, s), "bf16", Axis.TENSOR, 1, "dP"),
                  _tensor("backward/attention/grad_scores", (b, a, s, s), "bf16", Axis.TENSOR, 1, "dS")]
    for part, label in (("query", "dQ"), ("key", "dK"), ("value", "dV")):
        x = saved[f"attention/{part}"]
        terms.append(_tensor(f"backward/attention/grad_{part}", x.shape, "bf16", x.split, x.split_dim, label))
    terms.append(_tensor("backward/attention/grad_input", hidden, "bf16", Axis.SEQUENCE, 0, "dX leaving the layer"))
    terms += [x for x in work_tensors(h) if x.name.startswith("loss/")]
    return Inventory(tuple(terms))


def flash_attention(inventory: Inventory) -> Inventory:
    """FlashAttention (seed 004 §05.2, §07): Q·Kᵀ, P, dS, dP stay in SRAM
    tiles; of the (b, a, s, s) tensors nothing is saved or materialised, and
    the log-sum-exp (b, a, s), fp32, is saved instead. Condition: the fused
    attention kernel; the dropout mask is regenerated from the RNG state."""
    kept = [term for term in inventory if term.shape[-2:] != (s, s)]
    already = "attention/logsumexp" in inventory.names()  # a fused-attention layer (LLaMA, MoE) as it is
    if not already and any(term.name.startswith("attention/") for term in inventory):
        kept.append(SavedTensor("attention/logsumexp", (b, a, s), "fp32", Axis.TENSOR, 1, Group.BODY,
                                "Dao et al. 2022 (FlashAttention) §3.1", "row statistics kept for backward"))
    return Inventory(tuple(kept), inventory.applied + ("flash_attention",))


# --- the timeline ------------------------------------------------------------

@dataclass
class Timeline:
    """The phases of one step on the GPU accounted, and their peak.

    ``layers`` (n) is the layers per chunk, ``in_flight`` (k) the micro-batch
    chunks the stage holds at its fullest.
    """

    model: ModelConfig
    layout: Layout
    options: MemoryOptions
    families: list[PhaseFamily]
    layers: Expr
    in_flight: Expr
    strategy: Strategy
    notes: list[str] = field(default_factory=list)

    # -- symbolic ---------------------------------------------------------
    def candidates(self) -> list[tuple[str, Expr]]:
        """Each family at the end where it is largest (i = n): the instants the peak is taken over."""
        out = []
        for family in self.families:
            total = family.total()
            if family.indexed:
                slope = expand(total).coeff(i)
                if slope.is_nonnegative is not True:  # the end i = n is the family's maximum only if so
                    raise AssertionError(f"{family.name}: bytes not increasing in the layer index")
                out.append((family.label("n"), total.xreplace({i: self.layers})))
            else:
                out.append((family.label(), total))
        return out

    def peak_expression(self) -> Expr:
        """max over instants of the sum of what is alive, in the papers' letters."""
        return Max(*(expr for _, expr in self.candidates()))

    # -- at one configuration ---------------------------------------------
    def values(self) -> dict[str, int]:
        return self.layout.values(self.model)

    def instants(self) -> Iterator[tuple[str, PhaseFamily, int | None]]:
        """Every instant of the step, in order: (label, family, layer index)."""
        n = exact_int(self.layers, self.values())
        groups: list[list[PhaseFamily]] = []
        for family in self.families:
            if groups and family.loop and groups[-1][0].loop == family.loop:
                groups[-1].append(family)
            else:
                groups.append([family])
        for group in groups:
            first = group[0]
            if not first.indexed:
                yield first.label(), first, None
                continue
            for index in (range(1, n + 1) if first.order > 0 else range(n, 0, -1)):
                for family in group:
                    yield family.label(index), family, index

    def evaluate(self) -> "TimelineValues":
        """Bytes of each class at every instant, the peak and its phase t*."""
        values = self.values()
        class_exprs = {id(fam): fam.by_class() for fam in self.families}
        rows = []
        for label, family, index in self.instants():
            exprs = class_exprs[id(family)]
            row = {cls: exact_int(expr.xreplace({i: index}) if index else expr, values) for cls, expr in exprs.items()}
            rows.append((label, row))
        totals = [sum(row.values()) for _, row in rows]
        peak = max(totals)
        where = totals.index(peak)
        _, peak_family, index = list(self.instants())[where]
        breakdown = []
        for item in peak_family.items:
            expr = item.bytes.xreplace({i: index}) if index else item.bytes
            size = exact_int(expr, values)
            if size:
                breakdown.append((item.cls, item.name, size))
        return TimelineValues(rows, peak, rows[where][0], where, breakdown)

    def allocation_events(self) -> list[tuple[str, str, int]]:
        """The step as an allocation sequence, tensor by tensor, for the
        allocator model: ("alloc"/"free", key, bytes) and ("mark", label, 0)
        after each instant. Between instants, what is no longer alive is
        freed (last allocated first) before what is new is allocated."""
        values = self.values()
        live: dict[str, int] = {}
        events: list[tuple[str, str, int]] = []
        for label, family, index in self.instants():
            now: dict[str, int] = {}
            for item in family.items:
                sub = {i: index} if index else {}
                copies = exact_int(sympify(item.copies).xreplace(sub), values)
                first = exact_int(sympify(item.first).xreplace(sub), values)
                for copy in range(first, first + copies):
                    for name, size in item.tensors:
                        now[f"{item.group or item.name}#{copy}/{name}"] = exact_int(sympify(size).xreplace(sub), values)
            for key in reversed(list(live)):
                if key not in now or now[key] != live[key]:
                    events.append(("free", key, live.pop(key)))
            for key, size in now.items():
                if key not in live and size > 0:
                    live[key] = size
                    events.append(("alloc", key, size))
            events.append(("mark", label, 0))
        return events

    def reserved(self) -> list[int]:
        """Bytes reserved at each instant: :meth:`allocation_events` run
        through the caching-allocator model (:mod:`symbolic.step.allocator`)."""
        from .allocator import reserved_at_marks
        return [reserved for _, _, reserved in reserved_at_marks(self.allocation_events())]


@dataclass
class TimelineValues:
    rows: list[tuple[str, dict[str, int]]]
    peak: int
    t_star: str
    t_star_index: int
    breakdown: list[tuple[str, str, int]]

    def totals(self) -> list[int]:
        return [sum(row.values()) for _, row in self.rows]

    def peak_by_class(self) -> dict[str, int]:
        return dict(self.rows[self.t_star_index][1])


def in_flight(layout: Layout) -> tuple[Expr, Expr, list[str]]:
    """(micro-batch chunks held at the fullest, layers per chunk, notes).

    No pipeline: one micro-batch over L layers. 1F1B: the first stage runs
    min(m, p) forwards before its first backward (m micro-batches per
    iteration per data-parallel rank): p when m >= p (symbolic), else m.
    Interleaved: 2(p-1) + (v-1)p + 1 chunks of L/(p v) layers (m >= p assumed).
    """
    notes = []
    if layout.pp == 1:
        return Integer(1), L, notes
    # Uneven stages (Megatron-Core's first/last-stage layer counts): the first stage holds L_1 layers.
    stage = L_1 if layout.uneven_stages else L / p
    if layout.uneven_stages:
        notes.append("uneven stages: the first stage holds L_1 layers")
    if layout.interleave > 1:
        notes.append("interleaved schedule: in-flight chunks assume m >= p micro-batches per iteration")
        return interleave_in_flight(p, v), stage / v, notes
    m_iter = layout.iteration_micro_batches()
    if m_iter >= layout.pp:
        notes.append(f"1F1B first stage: min(m, p) = p micro-batches in flight (m = {m_iter})")
        return p, stage, notes
    notes.append(f"1F1B first stage: min(m, p) = m = {m_iter} micro-batches in flight (fewer than p = {layout.pp})")
    return Integer(m_iter), stage, notes


def build(model: ModelConfig, layout: Layout = Layout(), options: MemoryOptions = MemoryOptions()) -> Timeline:
    """The timeline of one training step of ``model`` under ``layout``."""
    from ..bill.derive import inventories  # here: the bill imports the ledgers

    layout.validate(model)
    if layout.cp > 1:
        raise ConfigError(f"cp {layout.cp}: the timeline does not model context parallelism (its ring buffers "
                          "and work tensors); use cp 1 here — bill, plan and solve model it")
    from ..bill.derive import model_state_blocks

    param_inv, base, _ = inventories(model)
    strategy = layout.strategy()
    k, n, notes = in_flight(layout)
    pipeline = layout.pp > 1

    # Saved tensors per layer under the strategy, and the whole layer without recompute.
    work = layer_work_tensors(base)
    if layout.ep == 1:  # no all-to-all: the permuted tokens go straight to the expert-TP gather
        work = Inventory(tuple(x for x in work if x.name != "forward/moe/received_tokens"), work.applied)
    if options.flash_attention:
        base = flash_attention(base)
    saved = strategy.apply(base)
    # What recompute re-creates, and what forward produces and drops, is in the compute dtype:
    # FP8 *storage* applies to saved tensors only (seed 004 §05.2).
    compute_dtype = "bf16" if strategy.dtype == "fp8" else strategy.dtype
    whole = replace(strategy, recompute="none", dtype=compute_dtype).apply(base)
    saved_attention = saved.select("attention")
    kept = set(saved.names())
    if strategy.recompute == "full":
        window_mlp = Inventory(tuple(x for x in whole if x.group is not Group.LAYER_INPUT))
        window_attention = Inventory(tuple(x for x in whole.select("attention") if x.group is not Group.LAYER_INPUT))
    elif strategy.recompute == "selective":
        # Megatron-Core's moe_act recomputes the experts' activation in the MLP half's backward;
        # core_attn the attention core in the attention half's.
        expert_activation = (Group.EXPERT_ACTIVATION, Group.EXPERT_ACTIVATION_OUTPUT)
        window_mlp = Inventory(tuple(x for x in whole if x.name not in kept and x.group in expert_activation))
        window_attention = Inventory(tuple(x for x in whole if x.name not in kept and x.group not in expert_activation))
    else:
        window_mlp = window_attention = Inventory(())

    # Work tensors, sharded as the strategy shards (TP always; SP when on). They are in the
    # compute dtype: fp32 training makes the 2-byte ones fp32; FP8 *storage* leaves them alone.
    if strategy.dtype == "fp32":
        work = work.map(lambda x: replace(x, dtype="fp32") if x.dtype == "bf16" else x, "dtype")
    work = tensor_parallel(work)
    if strategy.sequence_parallel:
        work = sequence_parallel(work)
    work = strategy.dispatch(work)  # the experts' gradients as their activations: after dispatch (f_e/e_t wide)
    if options.flash_attention:
        work = Inventory(tuple(x for x in work if x.shape[-2:] != (s, s)), work.applied)
    forward_work = work.select("forward")
    if strategy.recompute != "none":
        # the tensors recompute drops are still produced in forward, in the same kernel window
        forward_work = Inventory(forward_work.terms + tuple(
            x for x in whole if x.group is Group.ATTENTION_CORE and x.name not in kept))
    mlp_work, attention_work = work.select("backward/mlp"), work.select("backward/attention")
    loss_work = work.select("loss")
    if options.fused_cross_entropy:
        loss_work = loss_work.select("loss/logits")

    # Constant: model-state blocks per GPU, Psi = the configuration's parameter count.
    recipe = options.recipe_override or states.RECIPES[layout.optimizer]
    psi = params_ledger.count(param_inv)
    constant = []
    for block in recipe.blocks:
        if options.optimizer_offload and block.kind == "optimizer":
            continue
        # a dense model: one item per block; a mixture of experts: its dense part and its routed experts
        one = states.Recipe(recipe.name, (block,), recipe.source, recipe.condition)
        for name, size in model_state_blocks(model, layout, param_inv, one, params=psi).items():
            constant.append(Item("constant", f"constant/{name}", ((name, _whole_bytes(size, layout)),)))
    comm = [Item("communication", name, ((name, Integer(size)),)) for name, size in options.comm.items(layout)]
    comm += [Item("communication", name, ((name, size),)) for name, size in expert_all_to_all_staging(model, layout)]
    fixed = tuple(constant + comm)

    per_layer = _bytes(saved)
    offload = options.activation_offload

    def held() -> tuple[Item, ...]:
        if k == 1 or offload:
            return ()
        return (Item("activations", "activations/saved, earlier micro-batches", per_layer, (k - 1) * n, "held"),)

    def current(upto: Expr) -> Item:
        if offload:  # double buffer: the layer being computed and the one in transfer
            return Item("activations", "activations/saved, current micro-batch (on-GPU double buffer)",
                        per_layer, Integer(2), "current")
        return Item("activations", "activations/saved, current micro-batch", per_layer, upto, "current")

    def work_item(name: str, inv: Inventory, group: str, cls: str = "transients") -> tuple[Item, ...]:
        return (Item(cls, name, _bytes(inv), Integer(1), group, i),) if len(inv) else ()

    families = [PhaseFamily("fwd layer {i}", fixed + held() + (current(i),)
                            + work_item("transients/forward kernel work (attention scores)", forward_work, "fwd"),
                            indexed=True, order=1)]
    if not pipeline:
        families.append(PhaseFamily("loss", fixed + held() + (current(n),)
                                    + ((Item("transients", "transients/logits and cross-entropy",
                                             _bytes(loss_work), Integer(1), "loss", Integer(1)),) if len(loss_work) else ())))
    else:
        notes.append("the loss (logits, cross-entropy) runs on the last pipeline stage, not on the stage accounted")
    # Backward of layer i: the MLP half, then the attention half (layer i's MLP tensors released).
    mlp_items = fixed + held() + (current(i),)
    mlp_items += work_item("activations/recompute window (MLP and attention)", window_mlp, "window", "activations")
    mlp_items += work_item("transients/MLP backward work tensors", mlp_work, "bwd-mlp")
    families.append(PhaseFamily("bwd layer {i} (mlp)", mlp_items, indexed=True, order=-1, loop="backward"))
    if offload:
        attention_items = fixed + (current(i),)
    else:
        attention_items = fixed + held()
        attention_items += (Item("activations", "activations/saved, current micro-batch", per_layer, i - 1, "current"),
                            Item("activations", "activations/saved, layer i attention half", _bytes(saved_attention),
                                 Integer(1), "current", i))
    attention_items += work_item("activations/recompute window (attention)", window_attention, "window",
                                 "activations")
    attention_items += work_item("transients/attention backward work tensors", attention_work, "bwd-attn")
    families.append(PhaseFamily("bwd layer {i} (attention)", attention_items, indexed=True, order=-1,
                                loop="backward"))

    # Optimizer step: activations are gone; one fp32 temporary per (sharded) parameter.
    if not options.optimizer_offload:
        shard = layout.zero >= 1
        # 4 B per parameter of the optimizer's shard: the dense part's and the experts' (expert grid)
        step_temp = states.Recipe("temp", (states.Block("fp32 temporary", 4, "optimizer"),), "", "")
        temp = _whole_bytes(Add(*model_state_blocks(model, layout, param_inv, step_temp, zero=1 if shard else 0,
                                                    params=psi).values()), layout)
        families.append(PhaseFamily("optimizer step", fixed + (Item(
            "transients", "transients/optimizer-step temporaries (one fp32 per parameter shard)",
            (("optimizer/foreach temporary", temp),), Integer(1), "opt"),)))
    else:
        families.append(PhaseFamily("optimizer step", fixed))
        notes.append("optimizer offload: the Adam update runs on the CPU")
    if options.applied:
        notes.append("optimisations: " + ", ".join(options.applied))
    notes.extend(model.approximations)
    return Timeline(model, layout, options, families, n, k, strategy, notes)


def _whole_bytes(size: Expr, layout: Layout) -> Expr:
    """A model-state block as whole bytes. With uneven pipeline stages the bill's
    first-order share Psi·L_1/L of the parameters is not whole in general (61
    layers: a 61st of the count), and every instant of the timeline is counted in
    bytes: rounded up, less than 1 B per block. Even stages: unchanged."""
    return ceiling(size) if layout.uneven_stages else size


def peak(model: ModelConfig, layout: Layout = Layout(), options: MemoryOptions = MemoryOptions()):
    """(peak expression, peak bytes, t*) at the configuration of ``model`` and ``layout``."""
    tl = build(model, layout, options)
    result = tl.evaluate()
    return tl.peak_expression(), result.peak, result.t_star


def sum_of_class_maxima(result: TimelineValues) -> int:
    """What adding each class's own maximum would give: never less than the
    true peak, and more whenever the classes peak at different instants
    (seed 004 §03.1)."""
    return sum(max(row[cls] for _, row in result.rows) for cls in CLASSES)


__all__ = ["CLASSES", "CommSettings", "expert_all_to_all_staging", "all_to_all_staging", "FP8_TILE", "MemoryOptions", "Item", "PhaseFamily", "Timeline", "TimelineValues",
           "build", "peak", "work_tensors", "layer_work_tensors", "flash_attention", "in_flight", "sum_of_class_maxima", "i"]
