"""Step time: the ledgers priced on a GPU kind, every factor kept.

One iteration on one GPU is priced from the ledgers, nothing fitted to runs:

* **compute** — each FLOPs line (one matmul of the inventory, recompute
  included) on one GPU of the pacing pipeline stage (the last: L/p layers and
  the whole output side) / (dense peak × the GEMM efficiency of the hardware
  file, a stated step function of the FLOPs of one GEMM call), plus the HBM
  time of the GEMMs' operands and results (Calculon's ``no_overlap`` mode:
  FLOP time + memory time, calculon/system.py);
* **element-wise** — the non-matmul kernels (norms, softmax, GeLU, dropout,
  residual adds) are bound by HBM: each saved tensor of the layer (its bytes
  under the layout's TP/SP/CP split, no recompute) is moved
  :data:`ELEMENTWISE_PASSES` times — written and read in forward, read, and its
  gradient written and read, in backward; a recomputed forward moves it twice
  more (a named approximation of the traffic, not a per-kernel count); the
  output side's saved tensors (the fp32 log-softmax over s·b·V/t, the final
  norm, the targets) the same way, on the last stage once per micro-batch;
* **communication** — every term of :mod:`symbolic.ledgers.communication`
  costs α + ring factor × bytes / bus bandwidth per call (NCCL's ring model:
  α = base + intra-node steps × NVLink step + inter-node steps × network step),
  on the NVLink when its group stays inside one NVLink domain under Megatron's
  rank order (t innermost, then c, ep, d, p) and ``gpus_per_node``, else on the
  network, whose bus bandwidth is the members of the group on one node × the
  per-GPU network bandwidth (one NIC per GPU), at most the NVLink's;
* **overlap** (:class:`Overlap`) — what may hide behind compute is a strategy:
  the data-parallel gradient reduce behind the last micro-batch's backward,
  except its last bucket; the distributed optimizer's parameter all-gather
  behind the next forward, except its first bucket; ZeRO-3's prefetched
  gathers behind forward and backward; context parallelism's ring behind the
  attention core; TP collectives exposed unless ``tp_comm``; a hidden
  collective still slows the compute it overlaps by the share of the SMs its
  kernels take (the hardware file's ``processor_usage`` per link, Calculon's
  0.15 on NVLink and 0.02 on the network);
* **bubble** — (p − 1)/(v·m) × the pipelined part (compute, element-wise, TP,
  CP and the stage sends) (Narayanan et al. 2021 §2.2);
* **optimizer** — the step reads every state byte of its shard and writes back
  the optimizer states and the weights, at HBM speed.

Floats: a time is a measurement-like quantity and its inputs (efficiencies,
bandwidths) are not exact; the bytes and FLOPs it is built from are the exact
ledgers'. The same function prices one layout (``bill``) and arrays of layouts
(``plan``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

TYPE_CHECKING = False  # (typing.TYPE_CHECKING without importing typing: ≈ 2 ms of a cold bill)

from . import arrays as np  # numpy for a plan's arrays, plain floats for a bill's one layout

from .hardware import Hardware

if TYPE_CHECKING:  # sympy is imported where expressions are built, so a cached bill prices without it
    from sympy import Expr

    from ..core.tensors import Inventory

#: Passes over each saved tensor's bytes by the non-matmul kernels: forward write + read,
#: backward read of the saved tensor + write and read of its gradient.
ELEMENTWISE_PASSES = 5
#: Extra passes when the forward is recomputed (write + read again).
RECOMPUTE_PASSES = 2
#: Megatron-Core DDP bucket: 40 M elements (``DistributedDataParallelConfig.bucket_size`` default
#: max(40_000_000, 1_000_000 × dp)).
BUCKET_ELEMENTS = 40_000_000


@dataclass(frozen=True)
class Overlap:
    """Which communication the time model hides behind compute (a strategy).

    grad_reduce: the data-parallel gradient reduce runs during the last
    micro-batch's backward, bucket by bucket; only the last bucket stays
    exposed (Megatron-LM ``--overlap-grad-reduce``; DeepSpeed ``overlap_comm``).
    param_gather: the distributed optimizer's all-gather of updated weights runs
    under the next forward (``--overlap-param-gather``), and ZeRO-3 prefetches
    its gathers (DeepSpeed ``stage3_prefetch_bucket_size``). tp_comm: TP
    collectives overlapped with the GEMMs (``--tp-comm-overlap``); off, they are
    exposed. bucket_elements: gradient elements per bucket.
    """

    grad_reduce: bool = True
    param_gather: bool = True
    tp_comm: bool = False
    bucket_elements: int = BUCKET_ELEMENTS

    def describe(self) -> str:
        on = [name for name, flag in (("DP grad reduce", self.grad_reduce), ("param gather / ZeRO-3 prefetch",
                                       self.param_gather), ("TP comm", self.tp_comm)) if flag]
        return ("overlapped: " + ", ".join(on)) if on else "no overlap"


#: Named overlap strategies.
OVERLAPS = {
    "default": Overlap(),
    "none": Overlap(False, False, False),
    "all": Overlap(True, True, True),
}


# --- the expressions -----------------------------------------------------------

#: The kernels a compute line runs (:mod:`symbolic.ledgers.kernels` prices each from its own table):
#: a GEMM, a grouped GEMM (the routed experts), the fused attention kernel's forward and backward
#: passes, and its backward's recompute of the scores (all of it backward).
KERNEL_KINDS = ("gemm", "grouped", "attention", "attention-backward", "memory")  # memory: a pass over HBM, no FLOPs


@dataclass(frozen=True)
class ComputeLine:
    name: str
    flops: Expr        #: hardware FLOPs per GPU per iteration
    gemm_flops: Expr   #: FLOPs of one GEMM call on one GPU (sets its efficiency)
    attention_core: bool = False
    hbm_bytes: Expr = 0  #: operand and result bytes the GEMMs of the line move per GPU per iteration
    kernel: str = "gemm"  #: one of :data:`KERNEL_KINDS`
    #: one call's shape on one GPU: (groups, m, n, k) of the forward GEMM (output m × n, reduction k), or
    #: for the attention kernel (batch × heads, query sequence, key sequence, head dim)
    shape: tuple = (1, 1, 1, 1)
    passes: Expr = 3   #: passes over the forward product (3; 4 when recomputed): forward share (passes − 2)/passes


@dataclass(frozen=True)
class CommClass:
    """Collectives of one group, kind, phase and overlap rule, summed: they cost
    calls × α + ring factor × Σ calls·bytes / bus bandwidth together."""

    key: str
    group: str
    collective: str
    phase: str
    overlap: str
    size: Expr
    calls: Expr
    traffic_bytes: Expr      #: Σ calls × bytes of one call (not yet × ring factor)
    names: tuple[str, ...]


@dataclass
class TimeDerivation:
    """The expressions the time model prices, in the papers' letters (and B)."""

    compute: list[ComputeLine]
    model_flops: Expr           #: per GPU per iteration
    elementwise_bytes: Expr     #: HBM bytes of the non-matmul kernels per GPU per iteration
    optimizer_bytes: Expr       #: HBM bytes of the optimizer step per GPU
    grad_elements: Expr         #: gradient elements one GPU reduces
    comm: list[CommClass]
    collectives: tuple = ()     #: the communication ledger's terms themselves
    hardware_flops: "Expr" = 0  #: per GPU per iteration, averaged over all GPUs (the throughput's numerator)
    #: HBM bytes of the loss kernels (final norm, log-softmax over s·b·V/t, targets) per GPU of the last stage
    output_elementwise_bytes: "Expr" = 0

    def expressions(self) -> list[Expr]:
        out = []
        for line in self.compute:
            out += [line.flops, line.gemm_flops, line.hbm_bytes, *line.shape, line.passes]
        out += [self.model_flops, self.hardware_flops, self.elementwise_bytes, self.optimizer_bytes,
                self.grad_elements, self.output_elementwise_bytes]
        for cls in self.comm:
            out += [cls.size, cls.calls, cls.traffic_bytes]
        from sympy import Integer
        return [Integer(x) if isinstance(x, int) else x for x in out]


@dataclass(frozen=True)
class LoraTime:
    """What a LoRA run changes in the step time (:func:`derive_time`): ``trainable`` the adapters'
    parameters (whole model), ``adapter_forward`` their forward FLOPs per micro-batch (whole model),
    ``adapter_call`` one adapter GEMM's FLOPs (b·s × h × r, the efficiency's call size), and for a
    quantised base (``base_dtype`` int8 or nf4) ``base_bytes`` per packed weight element and
    ``quantised_elements`` the quantised weight matrices' elements (whole model)."""

    trainable: "Expr"
    adapter_forward: "Expr"
    adapter_call: "Expr"
    base_dtype: str = "bf16"
    base_bytes: "Expr | None" = None
    quantised_elements: "Expr" = 0


def derive_time(parameters: Inventory, saved: Inventory, matmuls: Inventory, *, sp: bool, recompute: str,
                flops_recompute: str, zero: int, pipeline: bool, interleaved: bool, context_parallel: bool,
                optimizer: str, dtype: str, tied: bool, fused_backward=0,
                expert_parallel: bool = False, output_saved: Inventory | None = None,
                lora: "LoraTime | None" = None) -> TimeDerivation:
    """The time model's expressions for one discrete choice of the layout.

    ``flops_recompute``: the recompute policy as the FLOPs see it (the bill's
    ``recompute_for_flops``); ``fused_backward``: FLOPs per micro-batch a fused
    attention kernel recomputes in backward (the bill's line of that name); ``output_saved``: the
    output side's saved tensors (final norm, fp32 log-softmax over the vocabulary, targets), whose
    loss kernels run on the last stage once per micro-batch under the same pass rule as a layer's.
    ``lora``: a LoRA run (:class:`LoraTime`): the frozen weights' GEMMs skip their weight gradients,
    the adapters' GEMMs are their own line, the optimizer step and the data-parallel gradient
    reduce (and the distributed optimizer's gather) cover the adapters only, and a quantised base
    pays its dequantisation, a memory pass per weight read.
    """
    from sympy import Integer

    from ..core.dims import B, L, Psi, b, c, d, p, t
    from ..core.tensors import DTYPE_BYTES, Group
    from ..layout.recipes import RECIPES
    from ..layout.strategies import Strategy
    from . import activations, flops
    from .communication import MICRO_BATCHES, terms

    if flops_recompute == "op-sac":  # each matmul marked with whether torchtitan's per-op policy re-runs it
        from ..layout.op_sac import mark
        matmuls = mark(matmuls)
    gpus = t * p * d * (c if context_parallel else 1)
    cp = c if context_parallel else 1
    micro_batches = B / b                     # micro-batches per iteration, all data-parallel ranks
    compute = []
    attention_shape = (Integer(1),) * 4
    average = Integer(0)
    row_parallel = _row_parallel(matmuls)
    act, weight = DTYPE_BYTES[dtype], RECIPES[optimizer].working_bytes(dtype)  # the copy the GEMMs read
    fused = fused_backward != 0
    for mm in matmuls:
        alone = type(matmuls)((mm,))
        per_mb = flops.hardware_training(flops_recompute, alone)
        if lora is not None and mm.weight:  # frozen: backward computes the input gradient only
            per_mb = per_mb - flops.forward(alone)
        # HBM bytes of one forward call on one GPU: A (M×K), B (K×N), C (M×N), each once; the backward's
        # two GEMMs (input and weight gradients) touch the same three shapes once each, so every pass over
        # the matmul (forward, backward's two, a recomputed forward) moves them once: bytes ∝ FLOPs.
        rows = mm.M / cp                                   # a context-parallel rank holds s/c of the tokens
        if not mm.weight:                                  # attention core: heads split by t
            call_bytes = mm.batch * (rows * mm.K + mm.K * mm.N + rows * mm.N) * act / t
            if fused and mm.group is Group.ATTENTION_CORE:
                call_bytes = Integer(0)                    # a fused kernel keeps scores and probabilities on chip
        elif mm.name in row_parallel:                      # K split: input sharded, output whole (then reduced)
            call_bytes = mm.batch * (rows * mm.K / t * act + mm.K * mm.N / t * weight + rows * mm.N * act)
        else:                                              # N split: input whole, output sharded
            call_bytes = mm.batch * (rows * mm.K * act + mm.K * mm.N / t * weight + rows * mm.N / t * act)
        passes = per_mb / ((L if mm.scope == "layer" else 1) * mm.forward_flops)
        calls = ((L / p) if mm.scope == "layer" else 1) * MICRO_BATCHES
        # One GEMM call on one GPU: the forward product split t ways (heads, FFN columns or vocabulary)
        # and over the c context-parallel ranks' tokens.
        call = mm.forward_flops / (t * cp)
        average += per_mb * micro_batches / gpus
        # The step is paced by the slowest pipeline stage: the last one holds L/p layers *and* the
        # whole output side (the logits are not split over p), so its FLOPs are /(t·d·c), not /(t·p·d·c).
        share = gpus if mm.scope == "layer" else gpus / p
        kernel, shape = _kernel_shape(mm, rows, t, fused, row_parallel)
        if kernel == "attention":
            attention_shape = shape
        compute.append(ComputeLine(mm.name, per_mb * micro_batches / share, call, mm.group is Group.ATTENTION_CORE,
                                   passes * calls * call_bytes, kernel, shape, passes))
    if fused_backward != 0:
        compute.append(ComputeLine("layer/attention/scores (fused kernel's backward recompute)",
                                   fused_backward * micro_batches / gpus, fused_backward / L / (t * cp), True,
                                   0, "attention-backward", attention_shape, Integer(3)))
        average += fused_backward * micro_batches / gpus
    model = flops.model_training(matmuls) * micro_batches / gpus
    if lora is not None:
        frozen = flops.forward(type(matmuls)(tuple(mm for mm in matmuls if mm.weight)))
        redo = lora.adapter_forward if flops_recompute == "full" else 0
        compute.append(ComputeLine("lora/adapters (x·A, (A·x)·B: forward, input and weight gradients)",
                                   (3 * lora.adapter_forward + redo) * micro_batches / gpus,
                                   lora.adapter_call / (t * cp), False))
        average += (3 * lora.adapter_forward + redo - frozen) * micro_batches / gpus
        model = (flops.model_training(matmuls) - frozen + 3 * lora.adapter_forward) * micro_batches / gpus
        if lora.base_bytes is not None:
            # bitsandbytes dequantises a quantised weight to a bf16 copy before each GEMM that reads it:
            # the packed weight read and the bf16 copy written, per read (forward, backward's input
            # gradient, a recomputed forward), per micro-batch, the GPU's share of the layers
            reads = 2 + (1 if flops_recompute == "full" else 0)
            compute.append(ComputeLine(f"lora/dequantise the {lora.base_dtype} base (a memory pass per weight read)",
                                       Integer(0), lora.adapter_call / (t * cp), False,
                                       reads * MICRO_BATCHES * lora.quantised_elements / (t * p)
                                       * (lora.base_bytes + DTYPE_BYTES["bf16"]), kernel="memory"))

    strategy = Strategy(tensor_parallel=True, sequence_parallel=sp, recompute="none", dtype=dtype,
                        context_parallel=context_parallel)
    layer_bytes = activations.total_bytes(activations.layer_inventory(strategy, saved))
    # the per-op policy re-runs every element-wise op of the block (norms, RoPE, SiLU, the product, the adds),
    # as full recompute does: only matmul and attention outputs are cached (layout/op_sac.py)
    passes = ELEMENTWISE_PASSES + (RECOMPUTE_PASSES if recompute in ("full", "op-sac") else 0)
    elementwise = passes * layer_bytes * (L / p) * MICRO_BATCHES
    # The loss side is element-wise too (upcast, log-softmax, its gradient over s·b·V/t values): the
    # same passes over its saved bytes, once per micro-batch on the last stage (no recompute there).
    output_bytes = activations.total_bytes(strategy.shard(output_saved)) if output_saved else Integer(0)
    output_elementwise = ELEMENTWISE_PASSES * output_bytes * MICRO_BATCHES

    recipe = RECIPES[optimizer]
    trainable = Psi if lora is None else lora.trainable   # LoRA: the optimizer steps the adapters only
    shard = trainable / (t * p) / ((d * cp) if zero >= 1 else 1)
    grad, param, states = recipe.bytes_of("gradients"), recipe.bytes_of("parameters"), recipe.bytes_of("optimizer")
    optimizer_bytes = shard * (2 * states + grad + param)   # read + write optimizer states, read grads, write weights
    gathered = recipe.working_bytes(dtype)   # ZeRO-3/FSDP gathers the copy the GEMMs read (fp32 cast to bf16)

    collectives = terms(parameters, saved, matmuls, sequence_parallel=sp, recompute=recompute, zero=zero,
                        pipeline=pipeline, interleaved=interleaved, context_parallel=context_parallel,
                        expert_parallel=expert_parallel, dtype=dtype, grad_bytes=grad, param_bytes=param, tied=tied,
                        gather_bytes=gathered)
    if lora is not None:  # the data-parallel reduce (and the distributed optimizer's gather) of the adapters only
        from dataclasses import replace as _replace
        collectives = [_replace(x, bytes=x.bytes.xreplace({Psi: lora.trainable})) if x.name.startswith("dp/") else x
                       for x in collectives]
    classes: dict[str, CommClass] = {}
    for x in collectives:
        prefix = x.name.split("/")[0]
        key = f"{prefix}:{x.group}:{x.collective}:{x.phase}:{x.overlap}"
        old = classes.get(key)
        if old is None:
            classes[key] = CommClass(key, x.group, x.collective, x.phase, x.overlap, x.size, x.calls,
                                     x.calls * x.bytes, (x.name,))
        else:
            classes[key] = CommClass(key, x.group, x.collective, x.phase, x.overlap, x.size, old.calls + x.calls,
                                     old.traffic_bytes + x.calls * x.bytes, old.names + (x.name,))
    return TimeDerivation(compute, model, elementwise, optimizer_bytes, trainable / (t * p), list(classes.values()),
                          collectives, average, output_elementwise)


def _kernel_shape(mm, rows, t, fused: bool, row_parallel: set) -> tuple:
    """(kernel, one call's shape on one GPU) of a matmul (:class:`ComputeLine`): a weight GEMM split by
    Megatron's rule (column-parallel: N/t, row-parallel: K/t), ``rows`` its tokens on the rank; routed
    experts a grouped GEMM of ``batch`` groups; the attention core the fused kernel's (batch × heads/t,
    queries, keys, head dim) — the scores product is the one whose output is s × s — or, unfused, a
    batched GEMM read as one GEMM of batch/t × M rows (a named approximation)."""
    from sympy import Integer

    if not mm.weight:
        if fused:
            # the windowed scores (scores_window) have band/s keys per query, not s
            keys, head_dim = (mm.N, mm.K) if mm.N == mm.M or mm.name.endswith("scores_window") else (mm.K, mm.N)
            return "attention", (mm.batch / t, rows, keys, head_dim)
        return "gemm", (Integer(1), mm.batch / t * rows, mm.N, mm.K)
    n, k = (mm.N, mm.K / t) if mm.name in row_parallel else (mm.N / t, mm.K)
    return ("grouped" if mm.batch != 1 else "gemm"), (mm.batch, rows, n, k)


def _row_parallel(matmuls) -> set[str]:
    """The row-parallel matmuls: Megatron-LM splits each block as column-parallel matmul(s) followed by
    one row-parallel matmul (Shoeybi et al. 2019 §3), so the last weight matmul of a block with
    several is row-parallel; a block of one (the logits) is column-parallel (vocabulary split)."""
    blocks: dict[str, list[str]] = {}
    for mm in matmuls:
        if mm.weight:
            blocks.setdefault("/".join(mm.name.split("/")[:2]), []).append(mm.name)
    return {names[-1] for names in blocks.values() if len(names) > 1}


# --- pricing -------------------------------------------------------------------

def stride(group: str, tp, cp, dp):
    """Rank distance between neighbours of a group under Megatron-LM's order
    (t innermost, then c, ep, d, p): t 1; c t; ep and the data-parallel group
    (d, with CP the d·c ranks) t; p t·c·d."""
    one = np.ones_like(np.asarray(tp, dtype=np.float64))
    return {"t": one, "c": tp * one, "ep": tp * cp * one, "d": tp * one, "p": tp * cp * dp * one}[group]


def link(group: str, collective: str, n, st, gpus_per_node: int, hw: Hardware, collectives: dict | None = None):
    """(latency per call s, bus bandwidth B/s, crosses nodes) of a ring of ``n``
    ranks ``st`` apart with ``gpus_per_node`` GPUs per NVLink domain.

    A ring that crosses nodes has ``per_node`` of its ranks on each node and moves its bytes through
    those ranks' NICs: ``per_node`` × the per-GPU network bandwidth. The st rings of one group that
    share a node (t·c·… of them: ``per_node`` = G/st each) thus split the node's NICs between them, as
    SimuMax's ``compute_net_op_time`` divides the node's bandwidth by min(G, tp) for a data-parallel
    group (MooreThreads/SimuMax simumax/core/config.py @4dcaae51).

    ``collectives``: measured NCCL collectives inside one node (:class:`symbolic.ledgers.kernels.Collective`
    by name, the GPU kind's own kernel tables): a ring within the node takes that collective's bus
    bandwidth and latency instead of the NCCL ring model's."""
    n = np.asarray(n, dtype=np.float64)
    per_node = np.where(st >= gpus_per_node, 1.0, np.minimum(n, np.floor(gpus_per_node / st)))
    nodes = np.ceil(n / np.maximum(per_node, 1.0))
    cross = nodes > 1
    nvlink = hw.nvlink_bandwidth * hw.nvlink_efficiency
    network = hw.internode_bandwidth * hw.internode_efficiency
    if collective in ("send-recv", "all-to-all"):
        bus = np.where(cross, network, nvlink)        # each GPU sends its own message through its own NIC
    else:
        bus = np.where(cross, np.minimum(nvlink, per_node * network), nvlink)
    steps = 2 * (n - 1) if collective == "all-reduce" else (np.ones_like(n) if collective == "send-recv" else n - 1)
    inter = np.where(cross, (2 if collective == "all-reduce" else 1) * (nodes - 1), 0.0)
    if collective == "send-recv":
        inter = np.where(cross, 1.0, 0.0)
    lat = hw.latency["base"] + (steps - inter) * hw.latency["nvlink_step"] + inter * hw.latency["network_step"]
    measured = (collectives or {}).get(collective)
    if measured is not None:
        lat = np.where(cross, lat, measured.latency(n, steps))
        bus = np.where(cross, bus, measured.bus_bandwidth)
    return lat, bus, cross


def pacing_stage(letters: dict, pp, layer_seconds, output_seconds):
    """With uneven stages (``letters`` holds L, L_1 and L_p): (the pacing stage's layers over the L/p
    priced, 1 if it holds the output side else 0, its name) — the slowest of the first stage (L_1
    layers), the last (L_p layers and the output side) and a middle one ((L − L_1 − L_p)/(p − 2)
    layers), judged on compute; None for even stages, priced at L/p layers and the output side."""
    if not all(key in letters for key in ("L", "L_1", "L_p")):
        return None
    layers, first, last = (np.asarray(letters[key], dtype=np.float64) for key in ("L", "L_1", "L_p"))
    per_stage = layers / pp
    k_first, k_last = first / per_stage, last / per_stage
    k_mid = np.where(pp > 2, (layers - first - last) / np.maximum(pp - 2, 1) / per_stage, 0.0)
    t_first, t_last, t_mid = layer_seconds * k_first, layer_seconds * k_last + output_seconds, layer_seconds * k_mid
    last_paces = (t_last >= t_first) & (t_last >= t_mid)
    factor = np.where(last_paces, k_last, np.where(t_first >= t_mid, k_first, k_mid))
    name = np.where(last_paces, "last", np.where(t_first >= t_mid, "first", "middle"))
    return factor, np.where(last_paces, 1.0, 0.0), name


def _rf(collective: str, n):
    n = np.asarray(n, dtype=np.float64)
    return {"all-reduce": 2 * (n - 1) / n, "send-recv": np.ones_like(n)}.get(collective, (n - 1) / n)


@dataclass
class StepTime:
    """The priced iteration (arrays: one entry per layout; a bill has one)."""

    step_seconds: np.ndarray
    breakdown: dict[str, np.ndarray]
    compute_lines: list[dict] = field(default_factory=list)
    comm_lines: list[dict] = field(default_factory=list)
    factors: dict[str, object] = field(default_factory=dict)
    model_flops: np.ndarray | None = None
    hardware_flops: np.ndarray | None = None
    tokens: np.ndarray | None = None     #: tokens per iteration, all GPUs
    peak: float = 0.0
    gpus: np.ndarray | None = None

    @property
    def tokens_per_second(self):
        return self.tokens / self.step_seconds

    @property
    def model_tflops_per_gpu(self):
        return self.model_flops / self.step_seconds / 1e12

    @property
    def hardware_tflops_per_gpu(self):
        return self.hardware_flops / self.step_seconds / 1e12

    @property
    def mfu(self):
        return self.model_flops / self.step_seconds / self.peak

    @property
    def hfu(self):
        return self.hardware_flops / self.step_seconds / self.peak


def price(derivation: TimeDerivation, numbers: list, letters: dict, hw: Hardware, *, overlap: Overlap = Overlap(),
          gpus_per_node: int | None = None, gemm_dtype: str = "bf16", detail: bool = False,
          kernel_tables=True, compute_totals: tuple | None = None, schedule=None) -> StepTime:
    """Price an iteration. ``numbers``: the values of ``derivation.expressions()``
    (arrays or floats, same order); ``letters``: arrays for t p d c v b B and s.
    ``gpus_per_node``: the NVLink domain (default: the hardware's). ``kernel_tables``: price the
    kernels from the measured tables of :mod:`symbolic.ledgers.kernels` where the GPU kind has them
    (own or borrowed); off, or for a GPU with none, the hardware file's GEMM-size step function; a
    :class:`~symbolic.ledgers.kernels.KernelTables` itself: those tables (the calculator page's, their
    figures symbols). ``compute_totals``: (GEMM seconds, of them the output side's, FLOPs on the pacing stage, attention
    core seconds) of compute lines priced apart, the loop below adding ``derivation.compute``'s to them
    (the calculator page prices each line on its own, :mod:`symbolic.render.page_time`); None: zeros.
    ``schedule``: None for Megatron's 1F1B and interleaved 1F1B (the closed-form bubble below), else a
    pipeline schedule beyond them as (:class:`~symbolic.layout.schedules.Schedule`, v, m) of one layout
    (floats, not arrays): its bubble is its order simulated (:func:`schedule_bubble`)."""
    G = gpus_per_node or hw.nvlink_domain
    peak = hw.peak("bf16")             # the throughput figures' denominator (MFU, HFU): the dense BF16 peak
    # A low-precision recipe (layout.precision) runs the layers' weight GEMMs in FP8 (or FP4, NVFP4); the
    # attention core stays in BF16 (TE's FP8 attention is its own option), and so does the output layer
    # (Megatron-Core's output layer is no TE module; DeepSeek-V3 §3.3 keeps the output head in BF16). The
    # GEMM efficiency of a shape is the BF16 table's × the kind's mamf-finder FP8/BF16 ceiling ratio
    # (ledgers.kernels); FP4 takes the FP8 one — no FP4 ceiling is published (a named assumption).
    fp8_missing = gemm_dtype == "fp8" and not hw.peak_fp8_flops
    weight_peak = hw.peak("bf16" if fp8_missing else gemm_dtype)
    low_precision = gemm_dtype != "bf16"
    it = iter(np.asarray(x, dtype=np.float64) for x in numbers)
    tp, pp, dp = (np.asarray(letters[k], dtype=np.float64) for k in ("t", "p", "d"))
    cp = np.asarray(letters.get("c", 1.0), dtype=np.float64)
    vv = np.asarray(letters.get("v", 1.0), dtype=np.float64)
    m = np.asarray(letters["B"], dtype=np.float64) / (np.asarray(letters["b"], dtype=np.float64) * dp)

    gemm = 0.0
    gemm_output = 0.0                  # the output side's lines (the logits): on the last stage only
    weight_gradient = 0.0              # of gemm, the weight-gradient GEMMs (a zero-bubble schedule's W)
    weight_gradient_output = 0.0
    attention = 0.0
    paced_flops = 0.0
    if compute_totals is not None:
        gemm, gemm_output, paced_flops, attention = compute_totals
    compute_lines = []
    from .kernels import for_hardware

    if isinstance(kernel_tables, bool):
        tables = for_hardware(hw.name, hw.peak_bf16_flops) if kernel_tables else None
    else:
        tables = kernel_tables
    if tables is None:
        hbm = hw.hbm_bandwidth * hw.hbm_efficiency
        hbm_loss = hbm
    else:                               # the memory-bound kernels as measured (ledgers.kernels)
        hbm = hw.hbm_bandwidth * tables.memory_efficiency
        hbm_loss = hw.hbm_bandwidth * tables.loss_memory_efficiency
    for line in derivation.compute:
        f, call, moved, groups, m_, n_, k_, passes = (next(it) for _ in range(8))
        in_bf16 = line.attention_core or (low_precision and line.name.startswith("output/"))
        line_peak = peak if in_bf16 else weight_peak
        if line.kernel == "memory":  # a memory pass (a quantised base's dequantisation): its bytes over HBM
            eff, seconds = np.zeros_like(np.asarray(moved, dtype=float)), moved / hbm
            w_seconds = 0.0
        elif tables is None:
            eff = hw.efficiency(call)
            # Calculon's "no_overlap" processing mode (calculon/system.py): a kernel's time is its FLOP time
            # plus its HBM time, the two not overlapped.
            seconds = f / (line_peak * eff) + moved / hbm
            w_seconds = 0.0 if line.attention_core else \
                f * np.where(passes > 0, 1 / np.maximum(passes, 1e-300), 0.0) / (line_peak * eff)
        else:
            # Each pass at its own measured efficiency; a measured kernel's time includes its own operand
            # traffic, so no HBM term is added. Forward share (passes − 2)/passes (a recomputed forward is a
            # forward), each gradient GEMM 1/passes.
            forward = np.where(passes > 0, (passes - 2) / np.maximum(passes, 1e-300), 0.0)
            gradient = np.where(passes > 0, 1 / np.maximum(passes, 1e-300), 0.0)
            dtype = "bf16" if in_bf16 else gemm_dtype
            if line.kernel == "attention":
                e_f = tables.attention_efficiency("forward", m_, groups, k_)
                e_b = tables.attention_efficiency("backward", m_, groups, k_)
                per_flop = forward / e_f + 2 * gradient / e_b
            elif line.kernel == "attention-backward":
                e_b = tables.attention_efficiency("backward", m_, groups, k_)
                per_flop = 1 / e_b
            else:
                lookup = tables.grouped_efficiency if line.kernel == "grouped" else (
                    lambda stage, g, m, n, k, dt: tables.gemm_efficiency(stage, m, n, k, dt))
                e_f = lookup("forward", groups, m_, n_, k_, dtype)
                e_d = lookup("input_gradient", groups, m_, k_, n_, dtype) if line.kernel == "gemm" else \
                    lookup("input_gradient", groups, m_, n_, k_, dtype)
                e_w = lookup("weight_gradient", groups, n_, k_, m_, dtype) if line.kernel == "gemm" else \
                    lookup("weight_gradient", groups, m_, n_, k_, dtype)
                per_flop = forward / e_f + gradient / e_d + gradient / e_w
            seconds = f * per_flop / line_peak
            w_seconds = f * gradient / e_w / line_peak if line.kernel in ("gemm", "grouped") else 0.0
            eff = np.where(per_flop > 0, 1 / np.maximum(per_flop, 1e-300), 0.0)   # over the line's FLOPs
        gemm = gemm + seconds
        weight_gradient = weight_gradient + w_seconds
        if line.name.startswith("output/"):
            gemm_output = gemm_output + seconds
            weight_gradient_output = weight_gradient_output + w_seconds
        paced_flops = paced_flops + f
        if line.attention_core:
            attention = attention + seconds
        if detail:
            compute_lines.append({"name": line.name, "flops_on_pacing_stage": f, "gemm_flops_per_call": call,
                                  "efficiency": eff, "hbm_bytes": moved, "seconds": seconds,
                                  "kernel": line.kernel if tables is not None or line.kernel == "memory" else "gemm (size step)",
                                  "shape": (groups, m_, n_, k_), "passes": passes,
                                  # a weight GEMM the recipe runs in FP8/FP4: its operands are quantised
                                  "low_precision": low_precision and not fp8_missing and not in_bf16
                                                   and line.kernel in ("gemm", "grouped")})
    model_flops, hardware_flops, elem_bytes, opt_bytes, grad_elements, out_bytes = (next(it) for _ in range(6))
    elementwise = elem_bytes / hbm
    elementwise_output = out_bytes / hbm_loss  # the loss kernels: on the last stage only, like the logits
    # Uneven stages (L_1 layers on the first, L_p on the last): the slowest stage paces the pipeline,
    # its layers' compute (and later their TP/CP/EP collectives) scaled from the L/p priced.
    pacing = pacing_stage(letters, pp, gemm - gemm_output + elementwise, gemm_output + elementwise_output)
    if pacing is None:
        elementwise = elementwise + elementwise_output
    else:
        layers_factor, output_on, stage_name = pacing
        gemm = (gemm - gemm_output) * layers_factor + gemm_output * output_on
        weight_gradient = (weight_gradient - weight_gradient_output) * layers_factor + weight_gradient_output * output_on
        attention = attention * layers_factor
        elementwise = elementwise * layers_factor + elementwise_output * output_on
        for line in compute_lines:
            line["seconds"] = line["seconds"] * (output_on if line["name"].startswith("output/") else layers_factor)
    compute = gemm + elementwise
    forward_share = np.where(paced_flops > 0, model_flops / 3 / np.maximum(hardware_flops, 1e-300), 0.0)
    window_forward = compute * forward_share            # all micro-batches' forward on this GPU
    window_backward = compute - window_forward           # backward, recompute included

    zero = np.zeros(np.broadcast(tp, pp, dp, cp).shape)
    parts = {k: zero.copy() for k in ("tp", "cp", "ep", "pp", "dp", "zero3")}
    #: overlapped collectives that share one compute window, summed over their classes (a link
    #: carries one collective at a time, so each class cannot hide behind the whole window)
    shared = {k: zero.copy() for k in ("tp", "cp", "zero3_forward", "zero3_backward")}
    first = {k: zero.copy() for k in ("zero3_forward", "zero3_backward")}
    comm_lines = []
    seen = []                               # per class: seconds, exposed, shared window, on the network, bucket
    window_of: list[str | None] = []        # per detail line: the shared window its class is summed into
    for cls in derivation.comm:
        n, calls, traffic = next(it), next(it), next(it)
        group = cls.group
        lat, bus, cross = link(group, cls.collective, n, stride(group, tp, cp, dp), G, hw,
                               # measured on one node of the hardware file's NVLink domain, not another
                               tables.collectives if tables is not None and G == hw.nvlink_domain else None)
        active = n > 1
        seconds = np.where(active, calls * lat + _rf(cls.collective, n) * traffic / bus, 0.0)
        prefix = cls.key.split(":")[0]
        window_key = None
        one_call = np.where(calls > 0, seconds / np.maximum(calls, 1e-300), 0.0)
        if prefix == "tp":
            # Overlapped TP collectives share one window, the GEMMs: summed over the classes below.
            if overlap.tp_comm:
                shared["tp"] = shared["tp"] + seconds
                exposed, window_key = zero, "tp"
            else:
                exposed = seconds
            bucket = "tp"
        elif prefix == "cp":
            shared["cp"] = shared["cp"] + seconds       # the ring hides behind the attention core, all classes together
            exposed, bucket, window_key = zero, "cp", "cp"
        elif prefix == "ep":
            exposed, bucket = seconds, "ep"
        elif prefix == "pp":
            exposed, bucket = seconds, ("pp" if cls.phase != "optimizer" else "dp")
        elif prefix == "dp":
            buckets = np.maximum(1.0, np.ceil(grad_elements / overlap.bucket_elements))
            per_bucket = np.where(active, lat + _rf(cls.collective, n) * traffic / calls / buckets / bus, 0.0)
            if cls.phase == "optimizer":            # distributed optimizer's parameter all-gather
                hidden = overlap.param_gather
                window = window_forward / m         # the next iteration's first micro-batch forward
            else:                                   # gradient reduce: the last micro-batch's backward
                hidden = overlap.grad_reduce
                window = window_backward / m
            per_call_seconds = seconds / np.maximum(calls, 1.0)
            exposed_call = np.maximum(per_call_seconds - window, per_bucket) if hidden else per_call_seconds
            exposed, bucket = np.where(active, exposed_call * calls, 0.0), "dp"
        elif prefix == "zero3":
            # Prefetched gathers hide behind the phase's compute; the first call of each micro-batch cannot.
            # The classes of one phase share its window and the link: summed below, not hidden one by one.
            if overlap.param_gather:
                key = "zero3_forward" if cls.phase == "forward" else "zero3_backward"
                shared[key] = shared[key] + np.where(active, seconds, 0.0)
                first[key] = np.maximum(first[key], np.where(active, one_call * m, 0.0))
                exposed, window_key = zero, key
            else:
                exposed = np.where(active, seconds, 0.0)
            bucket = "zero3"
        else:
            raise ValueError(f"unknown communication class {cls.key}")
        parts[bucket] = parts[bucket] + exposed
        seen.append((seconds, exposed, window_key, cross, bucket))
        if detail:
            comm_lines.append({"class": cls.key, "names": cls.names, "group": group, "collective": cls.collective,
                               "phase": cls.phase, "ranks": n, "calls": calls, "bytes": traffic,
                               "ring_factor": _rf(cls.collective, n), "latency_per_call": lat, "bus_bandwidth": bus,
                               "link": np.where(cross, "network", "NVLink"), "seconds": seconds, "exposed": exposed})
            window_of.append(window_key)
    exposed_of = {"tp": np.maximum(shared["tp"] - gemm, 0.0), "cp": np.maximum(shared["cp"] - attention, 0.0)}
    for key, window in (("zero3_forward", window_forward), ("zero3_backward", window_backward)):
        exposed_of[key] = np.maximum(shared[key] - window, first[key])
        parts["zero3"] = parts["zero3"] + exposed_of[key]
    for line, key in zip(comm_lines, window_of):    # a shared window's exposure, pro rata to each class's time
        if key is not None:
            line["exposed"] = np.where(shared[key] > 0, line["seconds"] / np.maximum(shared[key], 1e-300), 0.0) \
                * exposed_of[key]
    parts["tp"] = parts["tp"] + exposed_of["tp"]
    parts["cp"] = parts["cp"] + exposed_of["cp"]
    # A collective hidden behind compute still takes its share of the SMs while it runs (Calculon's
    # processor_usage): the compute it overlaps is slowed by that share of the hidden time.
    slow_pipelined, slow_other = zero.copy(), zero.copy()
    for seconds, exposed, key, cross, bucket in seen:
        if key is not None:
            exposed = np.where(shared[key] > 0, seconds / np.maximum(shared[key], 1e-300), 0.0) * exposed_of[key]
        slow = np.maximum(seconds - exposed, 0.0) * np.where(cross, hw.processor_usage["network"],
                                                             hw.processor_usage["nvlink"])
        if bucket in ("tp", "cp", "ep", "pp"):
            slow_pipelined = slow_pipelined + slow
        else:
            slow_other = slow_other + slow
    if pacing is not None:              # the per-layer collectives of the pacing stage's layers
        for key in ("tp", "cp", "ep"):
            parts[key] = parts[key] * pacing[0]
        slow_pipelined = slow_pipelined * pacing[0]
    schedule_factors = {}
    if schedule is not None:
        # DualPipe's paired forward-and-backward: each one's all-to-all and sends under the other's computation
        plan, v_, m_ = schedule
        from ..layout.schedules import paired_share
        if np.ndim(pp) == 0 and v_ is not None:  # one layout (the bill's)
            share = paired_share(plan, int(pp), v_, m_) if float(pp) > 1 else 0.0
        else:  # arrays of layouts (a plan's): once per distinct p, v, m
            share = _per_layout(lambda p_, v1, m1: paired_share(plan, p_, v1, m1) if p_ > 1 else 0.0, pp,
                                vv if v_ is None else v_, np.rint(m) if m_ is None else m_)
        for key in plan.overlaps:
            paired = parts[key] * share
            parts[key] = parts[key] - paired + np.maximum(paired - compute * share, 0.0)
        schedule_factors = {"paired_share": share}
    pipelined = compute + parts["tp"] + parts["cp"] + parts["ep"] + parts["pp"] + slow_pipelined
    if schedule is None:
        bubble = np.where(pp > 1, (pp - 1) / (vv * m), 0.0) * pipelined
    else:
        f_share = window_forward / np.maximum(compute, 1e-300)
        w_share = weight_gradient / np.maximum(compute, 1e-300)
        if np.ndim(pp) == 0 and schedule[1] is not None:  # one layout (the bill's)
            bubble, more = schedule_bubble(schedule, int(pp), float(m), pipelined, f_share, w_share)
            schedule_factors.update(more)
        else:
            plan = schedule[0]
            bubble = schedule_bubble_array(plan, pp, vv if schedule[1] is None else schedule[1],
                                           np.rint(m) if schedule[2] is None else schedule[2], m, pipelined,
                                           f_share, w_share)
            schedule_factors.update(schedule=plan.name, bubble_formula=plan.bubble)
    optimizer = opt_bytes / hbm
    step = pipelined + bubble + parts["dp"] + parts["zero3"] + slow_other + optimizer
    breakdown = {"compute": gemm, "elementwise": elementwise, "tp_exposed": parts["tp"], "cp_exposed": parts["cp"],
                 "ep_exposed": parts["ep"], "pp_exposed": parts["pp"], "bubble": bubble,
                 "dp_exposed": parts["dp"], "zero3_exposed": parts["zero3"],
                 "overlap_slowdown": slow_pipelined + slow_other, "optimizer": optimizer}
    breakdown = {k: np.broadcast_to(np.asarray(val, dtype=np.float64), np.shape(step)) for k, val in breakdown.items()}
    tokens = np.asarray(letters["B"], dtype=np.float64) * np.asarray(letters["s"], dtype=np.float64)
    gpus = tp * pp * dp * cp
    factors = {"hardware": hw.name, "peak_flops": peak,
               "gemm_dtype": "bf16 (no FP8 Tensor Cores on this GPU)" if fp8_missing else gemm_dtype,
               "gemm_peak_flops": weight_peak, "gpus_per_node": G, "overlap": overlap.describe(),
               "hbm_bandwidth_effective": hbm, "elementwise_passes": ELEMENTWISE_PASSES,
               "output_elementwise_seconds": elementwise_output,  # the loss kernels, in "elementwise"
               "pacing_stage": "last (L/p layers and the output side)" if pacing is None else pacing[2],
               "bubble_fraction": (np.where(pp > 1, (pp - 1) / (vv * m), 0.0) if schedule is None else
                                   bubble / np.maximum(pipelined, 1e-300)), "micro_batches_per_pipeline": m,
               **schedule_factors,
               "kernels": tables.describe() if tables is not None else (
                   "the hardware file's GEMM-size step function (no measured kernel table for this GPU)"),
               "kernel_approximation": tables.approximation if tables is not None else "",
               "kernel_sources": tables.sources if tables is not None else ()}
    return StepTime(step, breakdown, compute_lines, comm_lines, factors, model_flops, hardware_flops,
                    tokens, peak, gpus)


def _per_layout(function, pp, v, m) -> np.ndarray:
    """``function(p, v, m)`` (ints) of each layout of arrays ``pp``, ``v``, ``m``, computed once per distinct triple."""
    p_, v_, m_ = (np.asarray(x, dtype=np.float64) for x in np.broadcast_arrays(pp, v, m))
    triples, inverse = np.unique(np.stack([p_.ravel(), v_.ravel(), m_.ravel()]), axis=1, return_inverse=True)
    values = np.array([float(function(int(a), int(b), int(c))) for a, b, c in triples.T], dtype=np.float64)
    return values[np.asarray(inverse).ravel()].reshape(p_.shape)


def schedule_bubble_array(plan, pp, v, m_int, m, pipelined, forward_share, weight_share) -> np.ndarray:
    """:func:`schedule_bubble` over arrays of layouts (a plan's): the same simulation
    (:func:`symbolic.layout.schedules.simulate`, with arrays of durations, one per layout) once per distinct
    (p, v, simulated m), so each layout's bubble is the double the bill's own call gives it; 0 where p = 1."""
    from ..layout.schedules import simulate, simulated_micro_batches

    pp, v, m_int, m, pipelined, forward_share, weight_share = (np.asarray(x, dtype=np.float64) for x in np.broadcast_arrays(
        pp, v, m_int, m, pipelined, forward_share, weight_share))
    out = np.zeros(pipelined.shape)
    chunks = np.ones_like(v) if plan.placement == "dual" else v
    sizes = np.stack([pp.ravel(), v.ravel(), np.array([simulated_micro_batches(plan, int(a), int(b)) if a > 1 else 0
                                                       for a, b in zip(pp.ravel(), m_int.ravel())])])
    triples, inverse = np.unique(sizes, axis=1, return_inverse=True)
    inverse = np.asarray(inverse).ravel()
    for k, (p_, v_, m_sim) in enumerate(triples.T):
        if p_ <= 1:
            continue
        idx = np.flatnonzero(inverse == k)
        per_chunk = pipelined.ravel()[idx] / m.ravel()[idx] / chunks.ravel()[idx]
        f, w = forward_share.ravel()[idx], weight_share.ravel()[idx]
        sim = simulate(plan, int(p_), int(v_), int(m_sim), per_chunk * f, per_chunk * (1 - f - w), per_chunk * w)
        out.ravel()[idx] = sim["bubble"]
    return out


def schedule_bubble(schedule: tuple, pp: int, m: float, pipelined, forward_share, weight_share) -> tuple:
    """(bubble seconds, factors) of a schedule beyond Megatron's: its order simulated
    (:func:`symbolic.layout.schedules.simulate`) with one chunk's F, B and W — the pipelined time of
    one micro-batch on the pacing stage (``pipelined`` / m) split as the compute is (forward share;
    the weight-gradient GEMMs' share, W; the rest, B: input-gradient GEMMs, attention backward,
    recompute, element-wise), over the chunks a micro-batch crosses on a rank (v; DualPipe 1). The
    communication left exposed is split the same way (a named approximation: it rides with the
    compute of its phase)."""
    from ..layout.schedules import simulate, simulated_micro_batches

    plan, v, m_int = schedule
    if pp <= 1:
        return 0.0 * pipelined, {"schedule": plan.name}
    chunks = 1 if plan.placement == "dual" else v
    per_chunk = float(pipelined) / m / chunks
    f, w = float(forward_share), float(weight_share)
    sim = simulate(plan, pp, v, simulated_micro_batches(plan, pp, m_int), per_chunk * f,
                   per_chunk * (1 - f - w), per_chunk * w)
    return sim["bubble"] + 0.0 * pipelined, {
        "schedule": plan.name, "chunk_forward_seconds": per_chunk * f,
        "chunk_input_gradient_seconds": per_chunk * (1 - f - w), "chunk_weight_gradient_seconds": per_chunk * w,
        "bubble_formula": plan.bubble}


__all__ = ["Overlap", "OVERLAPS", "derive_time", "price", "StepTime", "TimeDerivation", "link", "stride"]
