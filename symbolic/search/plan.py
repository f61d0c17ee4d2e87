"""Plan a training layout: every valid layout of a model on N GPUs, evaluated at once, and ranked.

The bill (:mod:`symbolic.bill.derive`) itemises one layout exactly. A plan asks the
same question of every layout at once: :mod:`~symbolic.search.enumeration` lists the valid layouts,
:mod:`~symbolic.search.formulas` gives each discrete choice's ledgers (the bill's own calls, cached as text),
:mod:`~symbolic.search.verdict` evaluates them over arrays of layouts and :mod:`~symbolic.search.pricing`
prices their step time; this module ranks them (:func:`plan`, :class:`Plan`). Floats only screen and rank;
every layout a plan shows is evaluated again exactly, from the same expressions, so its totals equal
``make_bill``'s.

What a plan models, and what it does not:

* **Memory per GPU** = the bill's verdict: the peak of the step on the busiest
  GPU, the largest of the candidate instants of the first and the last
  pipeline stage, and with uneven stages of the busiest middle one (rank 1, L_m
  layers) (``symbolic.ledgers.peak``: model states, the chunks in flight,
  the output side, work tensors, the recompute window, communication buffers,
  ZeRO-3's gathered weights, the optimizer step's temporaries). Fragmentation
  and the CUDA context are not modelled; ``margin`` bytes are reserved from the
  GPU's memory for them: a layout *fits* when ``total ≤ gpu_memory − margin``.
  The papers' total (states + first-stage activations) is ``paper_total_bytes``.
* **Step time** = hardware FLOPs per GPU per iteration (recompute included,
  ``ledgers.flops.hardware_training``) / (peak × utilisation) × (1 + bubble),
  with the pipeline bubble of Narayanan et al. 2021 §2.2: ``(p−1)/m`` for
  1F1B and ``(p−1)/(v·m)`` interleaved, m = micro-batches per pipeline per
  iteration; under ``--schedule`` (zero-bubble, DualPipe) its order simulated, as the bill's.
  Communication time, overlap and kernel efficiency differences are not modelled: the utilisation stands for
  all of them.
* **Valid layouts**: t·p·d·c = N; :meth:`Layout.validate` (heads and FFN width
  divisible by t, layers by p·v, s by c and by t·c under SP, global batch by b·d) — where the layers do not
  divide over p, Megatron-Core's uneven first/last stages (``--decoder-first/last-pipeline-num-layers``), every
  split whose fullest stage holds ⌈L/p⌉ layers (``stages.balanced_splits``), each layout with its own; and
  the rules of the frameworks the papers used — ``symbolic.layout.layout.LAYOUT_RULES``,
  the one rule set every command applies: interleaving only when the
  micro-batches per pipeline are a multiple of p (Megatron-LM's
  ``get_forward_backward_func`` asserts it for the interleaved schedule),
  ZeRO-2/3 not combined with pp > 1 (DeepSpeed's ``PipelineEngine`` asserts
  ZeRO stage < 2: "incompatible with pipeline parallelism"), ZeRO only with
  d·c > 1 and SP only with t > 1 — and t within one node (Narayanan et al.
  2021 §3.3, takeaway #1).
* **Context parallelism** (c, ``Layout.cp``): swept over the divisors of N
  that divide s (t·c under SP: Megatron-LM splits the sequence by c, then SP
  splits each rank's s/c by t), t·p·d·c = N; activations /c, weights
  replicated on the c ranks, ZeRO over d·c (as the bill). Its ring
  communication is not modelled, so at equal time per sequence a layout with
  fewer context-parallel ranks ranks first.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Mapping

import numpy as np

from ..layout.choices import FLOAT_ACTIVATION_DTYPES, RECOMPUTE
from ..layout.layout import Layout
from ..layout.recipes import RECIPES  # the ledgers' recipes (ledgers.states re-exports them), as plain data
from ..ledgers.hardware import Hardware
from ..ledgers.time import Overlap
from ..models.config import ConfigError, ModelConfig, check_position_table, positive_int
# The rooms a plan is built from (the package's docstring draws them), and the names this module has always
# offered — tests, benchmarks, solve and the API import them from here.
from .enumeration import (  # noqa: F401
    FIXABLE, MAX_LAYOUTS, TRIAL_DIVISION_MAX, _expert_grids, _fixed, divisors, enumerate_layouts)
from .formulas import (  # noqa: F401
    ARG_NAMES, MODEL_LETTERS, RECOMPUTE_ORDER, SCHEDULES, TIME_NAMES, Group, GroupFormulas, __getattr__,
    _array_function, _check_arch, _common_subexpressions, _exact_function, _letters, _verdict_stages,
    activations_expr, default_hardware, flops_expr, group_formulas, lever_expressions, lever_fields, lever_layout,
    PLACED, model_flops_expr, params_expr, peak_exprs, schedule_of, states_expr)
from .pricing import (  # noqa: F401
    TIME_COLUMNS, TIME_PARTS, _indices_by_key, _joined, _time_inputs, pipeline_bubble, price_groups, step_seconds,
    time_binding, time_function, time_sweep)
from .verdict import (  # noqa: F401
    _COMM_SIZES, _KERNELS, KERNEL_MIN, NATIVE_MIN, PAPERS_BLOCK, SWEEP_BLOCK, SWEEP_OUTPUTS, _block_env,
    _call_kernel, _kernel_env, _kernel_ready, _middle_values, _plain_length, _sweep_block, _sweep_kernel, _whole,
    comm_bytes, exact_totals, in_flight_array, layout_values, schedule_in_flight_array, sweep)


@dataclass
class Planned:
    """One layout of a plan, with its exact ledger totals and its time estimate."""

    layout: Layout
    totals: dict[str, object]           #: exact, equal to make_bill's totals of the same names
    headroom_bytes: object              #: usable memory − total (exact)
    fits: bool
    step_seconds: float
    bubble: float                       #: pipeline bubble, fraction of the ideal step time
    recompute_overhead: float           #: hardware / model FLOPs − 1
    binding: str                        #: what limits this layout (see :func:`_binding`)
    micro_batches_per_pipeline: int
    time_breakdown: dict[str, float] = field(default_factory=dict)  #: seconds per part of the step
    model_tflops_per_gpu: float = float("nan")
    mfu: float = float("nan")
    #: the layers of the first, each middle and the last stage where uneven ((first, last) at p = 2); () even
    split: tuple[int, ...] = ()

    def levers(self) -> dict[str, object]:
        """The layout's memory levers that differ from full training's defaults, as Layout fields."""
        return self.layout.memory_levers()

    def as_dict(self) -> dict[str, object]:
        lay = self.layout
        out = {"tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "cp": lay.cp, "ep": lay.ep, "etp": lay.etp or lay.tp,
               "micro_batch": lay.micro_batch,
               "zero": lay.zero, "recompute": lay.recompute, "sp": lay.sp, "interleave": lay.interleave,
               "seq": lay.seq, "global_batch": lay.global_batch, "optimizer": lay.optimizer,
               "dtype": lay.dtype, "micro_batches_per_pipeline": self.micro_batches_per_pipeline}
        if lay.uneven_stages:
            out.update(first_stage_layers=lay.first_stage_layers, last_stage_layers=lay.last_stage_layers,
                       stage_layers=list(self.split))
        if lay.schedule and lay.pp > 1:
            out["schedule"] = lay.schedule
        if lay.fp8_activations:
            out["fp8_activations"] = True
        for name, value in self.levers().items():  # the memory levers (LoRA, offload), when set
            out[name] = value
        if lay.flash_attention:
            out["flash_attention"] = True
        if lay.loss != "eager":
            out["loss"] = lay.loss
        out.update({k: _jsonable(val) for k, val in self.totals.items()})
        out.update(headroom_bytes=_jsonable(self.headroom_bytes), fits=self.fits,
                   step_seconds=self.step_seconds, bubble=self.bubble,
                   recompute_overhead=self.recompute_overhead, binding=self.binding,
                   time_breakdown=self.time_breakdown, model_tflops_per_gpu=self.model_tflops_per_gpu, mfu=self.mfu)
        return out


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, str, float)):
        return value
    value = Fraction(value)
    return int(value) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


@dataclass
class Plan:
    """Every valid layout, evaluated; :meth:`ranked` gives the fitting ones, fastest first."""

    model: ModelConfig
    gpus: int
    gpu_memory: int
    margin: int
    hardware: Hardware
    seq: int
    global_batch: int
    params_hand: int | None
    optimizer: str
    dtype: str
    table: dict[str, np.ndarray]         #: one entry per layout evaluated (columns of equal length)
    order: np.ndarray                    #: indices of the fitting layouts, best first
    rules: list[str] = field(default_factory=list)
    moe_capacity: Fraction = Fraction(1)  #: the layouts' capacity factor (Layout.moe_capacity), fixed
    overlap: Overlap = field(default_factory=Overlap)
    gpus_per_node: int = 8
    optimizer_impl: str = "foreach"
    fp8_activations: bool = False  #: the layouts keep their linear layers' saved inputs in FP8
    first_stage_layers: int = 0  #: uneven stages, every layout (0: even)
    last_stage_layers: int = 0
    flash_attention: bool = False  #: the layouts run the fused attention kernel
    loss: str = "eager"  #: the layouts' loss kernel (Layout.loss)
    loss_under_tp: str | None = None  #: the kernel of the layouts with t > 1 where it is another (None: loss)
    seq_given: bool = False  #: s was given (--seq), not the model's or the stated default (seq_origin)
    #: the memory levers of every layout, as Layout fields (lora, lora_targets, base_dtype, double_quant,
    #: offload, activation_offload); empty: none
    levers: Mapping = field(default_factory=dict)
    #: a pinned choice that is a no-op in some layouts, and so not what they run (:func:`settled_pins`)
    notes: list[str] = field(default_factory=list)
    schedule: str = ""  #: the pipeline schedule of every layout with p > 1 ("": Megatron's, by v)

    @property
    def usable(self) -> int:
        return self.gpu_memory - self.margin

    @property
    def evaluated(self) -> int:
        return len(self.table["tp"])

    def layout_at(self, i: int) -> Layout:
        """Layout ``i``: its sizes, its split (its own first/last-stage layers) and the plan's shared fields."""
        return replace(_layout_from(self.table, i, self.seq, self.global_batch, self.optimizer, self.dtype,
                                    self.moe_capacity, self.optimizer_impl, self.schedule),
                       fp8_activations=self.fp8_activations, flash_attention=self.flash_attention,
                       loss=self.loss_of(int(self.table["tp"][i])), **self.levers)

    def loss_of(self, tp: int) -> str:
        """The loss kernel of a layout with ``tp`` tensor-parallel ranks."""
        return self.loss_under_tp if self.loss_under_tp and tp > 1 else self.loss

    def planned(self, i: int) -> Planned:
        """Layout ``i`` with exact totals (the bill's) and the float time estimate."""
        layout = self.layout_at(i)
        totals = exact_totals(self.model, layout, self.params_hand)
        if self.schedule in PLACED and layout.pp > 1:
            # a V or DualPipe's pair puts both ends of the model on rank 0: the sweep screened it at first order
            # (schedule_notes); what is shown is the bill's account of each rank's own layers
            from ..bill.derive import make_bill
            billed = make_bill(self.model, layout, params_hand=self.params_hand).totals
            totals = {name: billed[name] for name in totals}
        headroom = _whole(self.usable - Fraction(totals["total_bytes"]))
        breakdown = {name: float(self.table["time_" + name][i]) for name in TIME_COLUMNS[:-2]}
        return Planned(layout, totals, headroom, bool(headroom >= 0), float(self.table["step_seconds"][i]),
                       float(self.table["bubble"][i]), float(self.table["recompute_overhead"][i]),
                       _binding(self, i, layout, headroom), int(self.table["micro_batches"][i]), breakdown,
                       float(self.table["time_model_tflops_per_gpu"][i]), float(self.table["time_mfu"][i]),
                       self.split_at(i))

    def split_at(self, i: int) -> tuple[int, ...]:
        """Layout ``i``'s stage layers where uneven: (first, middle, last), (first, last) at p = 2; () even."""
        t = self.table
        if not (t["first_layers"][i] or t["last_layers"][i]) or t["pp"][i] == 1:
            return ()
        ends = (int(t["L_1"][i]), int(t["L_p"][i]))
        return ends if t["pp"][i] == 2 else (ends[0], int(t["L_m"][i]), ends[1])

    def ranked(self, top: int | None = 10) -> list[Planned]:
        """The fitting layouts, fastest first (``top`` None or 0: all)."""
        picked = self.order if not top else self.order[:top]
        return [self.planned(int(i)) for i in picked]

    def closest(self) -> Planned | None:
        """When nothing fits: the layout that misses by the least."""
        if self.evaluated == 0:
            return None
        return self.planned(int(np.argmin(self.table["total_bytes"])))


def _binding(plan: Plan, i: int, layout: Layout, headroom) -> str:
    """What limits a layout, in words.

    ``memory``: it recomputes, and the same layout with the next lighter policy
    does not fit (the memory forces the recompute); otherwise the largest term
    of the step beyond the GEMMs of the model FLOPs — recompute FLOPs, exposed
    communication of a group, the pipeline bubble, element-wise kernels, the
    optimizer step — as a share of the step. A layout that does not fit is
    bound by memory.
    """
    if headroom < 0:
        return f"memory: over by {float(-Fraction(headroom)) / 1e9:.2f} GB"
    if layout.recompute != "none":
        lighter = RECOMPUTE_ORDER[RECOMPUTE_ORDER.index(layout.recompute) - 1]
        try:
            total = exact_totals(plan.model, replace(layout, recompute=lighter), plan.params_hand)["total_bytes"]
        except ConfigError:
            total = None
        if total is not None and total > plan.usable:
            without = "no recompute" if lighter == "none" else f"{lighter} recompute"
            return f"memory: {without} would need {float(total) / 1e9:.2f} GB"
    return time_binding({name: float(plan.table["time_" + name][i]) for name in TIME_COLUMNS[:-2]},
                        float(plan.table["recompute_overhead"][i]), layout)




def plan(model: ModelConfig, gpus: int, gpu_memory: int, *, seq: int = 0, global_batch: int = 0,
         margin: int = 0, params_hand: int | None = None, optimizer: str = "bf16-adam", dtype: str = "bf16",
         hardware: Hardware | None = None, max_micro_batch: int = 16, gpus_per_node: int | None = None,
         fixed: Mapping[str, object] | None = None, moe_capacity=1, overlap: Overlap = Overlap(),
         optimizer_impl: str = "foreach", fp8_activations: bool = False, first_stage_layers: int = 0,
         last_stage_layers: int = 0, flash_attention: bool = False, loss: str = "eager",
         loss_under_tp: str | None = None, levers: Mapping | None = None, schedule: str = "") -> Plan:
    """Evaluate every valid layout of ``model`` on ``gpus`` GPUs of ``gpu_memory`` bytes.

    Keeps those whose verdict (the step's peak on the busiest GPU) ≤ ``gpu_memory − margin``
    (``optimizer_impl``: ``foreach`` steps keep fp32 temporaries, ``fused`` none) and ranks
    them by the step-time model of :mod:`symbolic.ledgers.time` (compute, communication
    placed by Megatron's rank order on ``hardware`` with ``gpus_per_node`` GPUs per
    NVLink domain, overlap, bubble, optimizer) per sequence (= step time when the
    global batch is fixed), then by headroom. ``hardware``: default the A100-80GB;
    ``gpus_per_node``: default its NVLink domain. Raises :class:`ConfigError` when no layout is
    valid at all (as opposed to none fitting). ``fp8_activations``: every
    layout keeps its linear layers' saved inputs in FP8. ``first_stage_layers``,
    ``last_stage_layers``: uneven pipeline stages for every layout (Megatron-Core's).
    ``flash_attention``: every layout runs the fused attention kernel (no s×s tensor saved, its
    backward recomputes Q·Kᵀ; ``strategies.flash_attention``) — memory and time both.
    ``loss``: every layout's loss kernel (``Layout.loss``; its output side and work tensors);
    ``loss_under_tp``: the kernel of the layouts with t > 1 instead (None: ``loss`` everywhere) — the bill's
    default under tensor parallelism (``layout.default_loss``) when the caller gave no loss.
    ``schedule``: the pipeline schedule of every layout with p > 1 (``layout.schedules.SCHEDULES``; "":
    Megatron's, 1F1B or interleaved by v), priced as the bill prices it — its chunks in flight from its order
    (``schedules.peak_in_flight``), DualPipe's two parameter copies, its bubble its order simulated
    (``ledgers.time.schedule_bubble``); a layout with p = 1 runs no schedule (said in :attr:`Plan.notes`).
    Layers that do not divide over p are split as Megatron-Core's uneven first/last stages
    (``stages.balanced_splits``: with p fixed every split whose fullest stage holds ⌈L/p⌉ layers, with p swept
    the one of them with the lightest ends, ``stages.lightest_ends``) unless ``first_stage_layers``/
    ``last_stage_layers`` fix the split.
    """
    from ..bill.evaluate import layout_structure
    from ..models.losses import LOSS_KERNELS, WHOLE_VOCABULARY

    _check_arch(model)
    for kernel in (loss, loss_under_tp or loss):
        if kernel not in LOSS_KERNELS:
            raise ConfigError(f"loss must be one of {', '.join(LOSS_KERNELS)}, not {kernel!r}")
    # the layouts' structure (the loss kernel rides in it) without and with tensor parallelism
    structures = {tp_split: layout_structure(model, Layout(flash_attention=flash_attention,
                                                            loss=(loss_under_tp or loss) if tp_split else loss))
                  for tp_split in (False, True)}
    positive_int("gpu_memory", gpu_memory)
    if margin < 0 or margin >= gpu_memory:
        raise ConfigError(f"margin ({margin:,} B) must be at least 0 and below the GPU memory ({gpu_memory:,} B)")
    if optimizer not in RECIPES:
        raise ConfigError(f"unknown optimizer {optimizer!r}; recipes: {', '.join(RECIPES)}")
    if optimizer_impl not in ("foreach", "fused"):
        raise ConfigError(f"optimizer-impl must be foreach or fused, not {optimizer_impl!r}")
    if RECIPES[optimizer].factored:
        raise ConfigError(f"optimizer {optimizer}: its factored states need the parameters' shapes; plan sweeps "
                          "per-parameter recipes — use `symbolic bill` for it")
    if dtype not in FLOAT_ACTIVATION_DTYPES:
        raise ConfigError(f"dtype must be one of {', '.join(FLOAT_ACTIVATION_DTYPES)}, not {dtype!r}")
    if schedule:
        from ..layout.schedules import schedule_named
        schedule_named(schedule)  # ConfigError naming the choices
        if schedule in PLACED and (levers or params_hand is not None):  # the bill's rules (bill.derive): the
            # layouts shown are billed
            raise ConfigError(f"--schedule {schedule} puts both ends of the model on rank 0, which the bill accounts "
                              "layer by layer: "
                              + ("a hand-filled --params is not a stage's own layers: drop --params"
                                 if params_hand is not None else
                                 "LoRA, a quantised base and offload are modelled with even pipeline stages: drop the "
                                 "lever")
                              + ", or choose --schedule zb-h1 / zb-h2 / 1f1b")
    if fixed and fixed.get("recompute") is not None and fixed["recompute"] not in RECOMPUTE:
        raise ConfigError(f"plan sweeps recompute among {', '.join(RECOMPUTE)}, not {fixed['recompute']!r}"
                          + (" (torchtitan's per-op policy is billed one layout at a time: `symbolic bill` or "
                             "`symbolic timeline` with --recompute op-sac)" if fixed["recompute"] == "op-sac" else ""))
    hardware = hardware or default_hardware()
    gpus_per_node = gpus_per_node or hardware.nvlink_domain
    seq_given = bool(seq)
    seq = positive_int("seq", seq) if seq else model.seq
    levers = dict(levers or {})
    if levers:  # the bill's one rule set for the levers (Layout.validate), before any layout is swept
        lever_check = Layout(seq=seq, optimizer=optimizer, optimizer_impl=optimizer_impl, **levers)
        lever_check.validate(model)
    check_position_table(model, seq)  # no layout can run it: the bill's one line, not "no valid layout"
    if loss in WHOLE_VOCABULARY:  # Layout's rule: no vocabulary split (layout._loss_kernel_parallelism)
        if fixed and fixed.get("tp") not in (None, 1):
            raise ConfigError(f"loss {loss} with tp {fixed['tp']}: the kernel has no vocabulary split — fix tp 1, "
                              "or use --loss vocab-parallel / fused")
        fixed = dict(fixed or {}, tp=1)
    table, rules = enumerate_layouts(model, gpus, seq=seq, global_batch=global_batch,
                                     max_micro_batch=max_micro_batch, gpus_per_node=gpus_per_node, fixed=fixed,
                                     moe_capacity=moe_capacity, first_stage_layers=first_stage_layers,
                                     last_stage_layers=last_stage_layers, levers=levers, schedule=schedule,
                                     # p pinned: every split of it; p swept: each p's lightest-ended split, so that
                                     # a frontier sweep stays one vectorised pass (benchmarks/frontier_plan.py)
                                     search_splits=True if _fixed(fixed).get("pp") else "lightest")
    n = len(table["tp"])
    if n == 0:
        raise ConfigError(f"no valid layout of {model.name} on {gpus} GPUs"
                          + (f" with global batch {global_batch}" if global_batch else "")
                          + (f" and {dict(_fixed(fixed))}" if _fixed(fixed) else "")
                          + ": choose a GPU count whose factors divide the heads "
                          f"({model.heads}) and layers ({model.layers}), and a cp that divides s ({seq})"
                          + (f", and the layouts --schedule {schedule} runs (its asserts on p and m)" if schedule
                             else "")
                          + (" and a global batch divisible by the data-parallel size" if global_batch else ""))
    values = Layout(seq=seq, **levers).values(model)
    scalars = {k: values[k] for k in MODEL_LETTERS + ("r",) if k in values}  # r: the LoRA rank
    cols = {"t": table["tp"], "p": table["pp"], "d": table["dp"], "b": table["micro_batch"],
            "v": table["interleave"], "c": table["cp"], "e": table["ep"], "e_t": table["etp"],
            "L_1": table["L_1"], "L_p": table["L_p"], "L_m": table["L_m"]}
    own = schedule not in ("", "1f1b", "interleaved")  # a schedule beyond Megatron's: its order's counts
    uneven = ((table["first_layers"] > 0) | (table["last_layers"] > 0)).astype(np.int64)

    def chunks_in_flight(stage, where=slice(None)):
        pp_, v_, m_ = (table[name][where] for name in ("pp", "interleave", "micro_batches"))
        return schedule_in_flight_array(schedule, pp_, v_, m_, stage) if own else in_flight_array(pp_, v_, m_, stage)

    cols["m"], cols["m_last"] = chunks_in_flight("first"), chunks_in_flight("last")
    # the middle stage's count: read by the uneven groups alone (the others' candidates are the first's and last's)
    cols["m_mid"] = cols["m"].copy()
    if uneven.any():
        rows = np.flatnonzero(uneven)
        cols["m_mid"][rows] = chunks_in_flight("middle", rows)
    scalars["C_f"] = float(Fraction(moe_capacity))
    micro_batches_total = table["micro_batches"] * table["dp"]
    out = {k: np.empty(n) for k in ("params", "model_states_bytes", "activation_bytes", "paper_total_bytes",
                                     "total_bytes",
                                     "flops_per_iteration", "model_flops_per_iteration")}
    schedule_index = np.where(table["pp"] == 1, 0, SCHEDULES.index(schedule) if own else
                              np.where(table["interleave"] > 1, 2, 1))
    # One group per discrete choice: the expressions differ in shape, not in values.
    context = (table["cp"] > 1).astype(np.int64)
    expert = (table["ep"] > 1).astype(np.int64)
    expert_tensor = (table["etp"] != table["tp"]).astype(np.int64)
    # the layouts with t > 1 are their own groups where their loss kernel is not the others' (loss_under_tp)
    tp_split = ((table["tp"] > 1) if loss_under_tp and loss_under_tp != loss
                else np.zeros_like(table["tp"], dtype=bool)).astype(np.int64)
    key = ((((((((uneven * 2 + tp_split) * 2 + expert) * 2 + expert_tensor) * 2 + context) * 2 + table["sp"]) * 3
             + table["recompute"]) * 4 + table["zero"]) * len(SCHEDULES) + schedule_index)
    for idx in _indices_by_key(key):
        i0 = idx[0]
        group = Group(bool(table["sp"][i0]), RECOMPUTE_ORDER[table["recompute"][i0]], int(table["zero"][i0]),
                      SCHEDULES[schedule_index[i0]], optimizer, dtype, structures[bool(tp_split[i0])],
                      bool(context[i0]), bool(expert[i0]), bool(expert_tensor[i0]), Fraction(moe_capacity) != 1,
                      optimizer_impl=optimizer_impl, fp8_activations=fp8_activations,
                      uneven=bool(uneven[i0]), **lever_fields(Layout(**levers)))
        vals = dict(scalars, **{k2: col[idx] for k2, col in cols.items() if uneven[i0] or k2 not in MIDDLE})
        result = sweep(group, vals, micro_batches_total[idx], params_hand)
        for name, arr in result.items():
            out[name][idx] = arr
    usable = gpu_memory - margin
    # Floats screen; layouts within 1e-9 of the limit are decided exactly.
    fits = out["total_bytes"] <= usable
    near = np.flatnonzero(np.abs(out["total_bytes"] - usable) <= 1e-9 * usable)
    for i in near:
        layout = replace(_layout_from(table, int(i), seq, global_batch, optimizer, dtype, moe_capacity, optimizer_impl,
                                      schedule),
                         fp8_activations=fp8_activations, flash_attention=flash_attention,
                         loss=(loss_under_tp or loss) if tp_split[i] else loss, **levers)
        fits[i] = exact_totals(model, layout, params_hand)["total_bytes"] <= usable
    bubble = (np.where(table["pp"] > 1, np.nan, 0.0) if own  # priced below, for the layouts that fit
              else pipeline_bubble(table["pp"], table["interleave"], table["micro_batches"]))
    sequences = table["micro_batch"] * micro_batches_total
    # The step-time model, priced for the layouts that fit (the others are never ranked).
    step = np.full(n, np.inf)
    times = {name: np.full(n, np.nan) for name in TIME_COLUMNS}
    gemm_dtype = Layout(optimizer=optimizer, fp8_activations=fp8_activations).gemm_dtype
    inputs = []
    for idx in _indices_by_key(key, fits):
        i0 = idx[0]
        group = Group(bool(table["sp"][i0]), RECOMPUTE_ORDER[table["recompute"][i0]], int(table["zero"][i0]),
                      SCHEDULES[schedule_index[i0]], optimizer, dtype, structures[bool(tp_split[i0])],
                      bool(context[i0]), bool(expert[i0]), uneven=bool(uneven[i0]), **lever_fields(Layout(**levers)))
        vals = dict(scalars, **{k2: col[idx] for k2, col in cols.items() if uneven[i0] or k2 not in MIDDLE})
        vals["Psi"] = out["params"][idx] if params_hand is None else float(params_hand)
        inputs.append((idx, _time_inputs(group, vals, sequences[idx])))
    from ..layout.schedules import schedule_named
    runs = schedule_named(schedule) if own else None  # priced by its order (ledgers.time.schedule_bubble)
    for idx, priced in price_groups(inputs, hardware, overlap, gpus_per_node, gemm_dtype, runs):
        step[idx] = priced.step_seconds
        if runs is not None:  # the simulated bubble over the pipelined time, as the bill's bubble_fraction
            bubble[idx] = priced.factors["bubble_fraction"]
        for name, arr in priced.breakdown.items():
            times[name][idx] = arr
        times["model_tflops_per_gpu"][idx] = priced.model_tflops_per_gpu
        times["mfu"][idx] = priced.mfu
    table.update(out)
    table.update({"time_" + name: arr for name, arr in times.items()})
    table.update(fits=fits, bubble=bubble, step_seconds=step, seconds_per_sequence=step / sequences,
                 recompute_overhead=out["flops_per_iteration"] / out["model_flops_per_iteration"] - 1,
                 headroom=usable - out["total_bytes"])
    fit_idx = np.flatnonzero(fits)
    # e·e_t for a mixture of experts (etp is stored as t there by default); a dense model has no expert grid.
    expert_ranks = table["ep"] * table["etp"] if model.experts else np.ones_like(table["ep"])
    # Fastest per sequence, then fewest context-parallel ranks, then fewest expert-grid ranks e·e_t
    # (of equal times, the smaller grid), then most headroom, then fewest
    # model-parallel ways. Times equal but for float rounding (a CP layout and its cp = 1 twin)
    # compare equal: 12 significant digits.
    order = fit_idx[np.lexsort((table["tp"][fit_idx] * table["pp"][fit_idx], -table["headroom"][fit_idx],
                                expert_ranks[fit_idx], table["cp"][fit_idx],
                                _significant(table["seconds_per_sequence"][fit_idx])))]
    return Plan(model, gpus, gpu_memory, margin, hardware, seq, global_batch, params_hand, optimizer, dtype,
                table, order, rules, notes=settled_pins(table, order, _fixed(fixed)) + schedule_notes(
                    table, order, schedule, model),
                schedule=schedule,
                moe_capacity=Fraction(moe_capacity), overlap=overlap,
                gpus_per_node=gpus_per_node, optimizer_impl=optimizer_impl,
                fp8_activations=fp8_activations, first_stage_layers=first_stage_layers,
                last_stage_layers=last_stage_layers, flash_attention=flash_attention, loss=loss,
                loss_under_tp=loss_under_tp if loss_under_tp != loss else None, seq_given=seq_given, levers=levers)


#: The middle stage's letters: read by the uneven groups' formulas alone (an even group's candidates are the first
#: and the last stage's), so not sliced for the others.
MIDDLE = ("L_m", "m_mid")


def settled_pins(table: Mapping[str, np.ndarray], order: np.ndarray, fixed: Mapping[str, object]) -> list[str]:
    """A sentence for each pinned choice some layouts do not run because it is a no-op there
    (:func:`symbolic.layout.layout.settle_no_ops`, which the enumeration applies: a ZeRO stage over d·c = 1,
    SP at t = 1): how many layouts, whether the best one is among them, and why none could keep it — so a
    pinned ``--zero 3`` ranked as ZeRO-0 is said, not silently dropped. (Refusing them was the rule before
    commit febeb40: the frameworks run such a layout, with the flag off.)"""
    n = len(table["tp"])
    best = int(order[0]) if len(order) else None
    notes = []
    pins = []
    if fixed.get("zero"):
        pins.append((f"--zero {fixed['zero']}", table["zero"] != fixed["zero"],
                     "d·c = 1 there: one data-parallel rank has nothing to shard, every state kept whole", "ZeRO-0"))
    if fixed.get("sp"):
        pins.append(("--sp", table["sp"] == 0,
                     "t = 1 there: sequence parallelism splits over the tensor-parallel group, and Megatron-LM "
                     "turns it off",
                     "without SP"))
    for flag, dropped, why, as_what in pins:
        k = int(np.count_nonzero(dropped))
        if not k:
            continue
        if k == n:
            where = f"in every one of the {n:,} valid layouts"
            if flag.startswith("--zero") and fixed["zero"] >= 2 and fixed.get("pp", 1) > 1:
                why += (f"; with --pp {fixed['pp']} no layout keeps ZeRO-{fixed['zero']} at d·c > 1: ZeRO-2/3 run "
                        "only with p = 1, DeepSpeed's pipeline engine")
            elif flag.startswith("--zero"):
                why += "; no valid layout has d·c > 1"
        else:
            where = f"in {k:,} of {n:,} valid layouts" + (", the best among them" if best is not None and dropped[best]
                                                          else "")
        notes.append(f"pinned {flag} is a no-op {where} ({why}): planned {as_what}")
    return notes


def schedule_notes(table: Mapping[str, np.ndarray], order: np.ndarray, schedule: str, model: ModelConfig) -> list[str]:
    """A sentence where ``--schedule`` is a no-op in some layouts (p = 1: no pipeline, no schedule; they are kept,
    as a pinned ZeRO stage at d·c = 1 is), where the schedule places a rank's chunks at both ends of the model
    (a V, DualPipe), and where a model's dense layers are placed (DeepSeek's first L_d): the plan's first-order
    share, against the bill's layer-by-layer account."""
    notes = []
    n = len(table["tp"])
    flat = table["pp"] == 1
    k = int(np.count_nonzero(flat))
    if k and schedule:
        best = len(order) and bool(flat[order[0]])
        notes.append(f"--schedule {schedule} is a no-op in {k:,} of {n:,} valid layouts (p = 1: no pipeline to "
                     f"schedule){', the best among them' if best else ''}: planned without a pipeline schedule")
    from ..layout.stages import dense_layer_ids
    if k < n and dense_layer_ids(model):
        notes.append(f"{model.name}'s dense layers (the first {len(dense_layer_ids(model))}) are counted in the sweep as a "
                     "share of every stage's layers (first order); the bill places them and accounts each pipeline "
                     "rank by its own layers (DeepSeek-V3 t1 p16 d128 e1 e_t4 b2 full recompute, split 2/4/3: 75.17 GB "
                     "here, 76.91 GB billed) — bill a pipelined layout for its exact figure")
    if schedule in PLACED and k < n:
        notes.append(f"--schedule {schedule} puts the first and the last stage on rank 0 "
                     + ("(two parameter copies a rank)" if schedule == "dualpipe" else "(a V)")
                     + ": the sweep screens each layout with a rank's states as the first-order share Ψ·copies/p and "
                     "the output side on rank 0, which leaves out rank 0's embedding and output layer (GPT-175B t8 "
                     "p8 d16: 0.29–0.34 GB under the bill); each layout shown is the bill's own account of its "
                     "ranks' layers, so one screened near the limit can show as not fitting")
    return notes


def _significant(x: np.ndarray, digits: int = 12) -> np.ndarray:
    """``x`` (positive) rounded to ``digits`` significant digits: a sort key that ties float noise."""
    if x.size == 0:
        return x
    scale = 10.0 ** (np.floor(np.log10(x)) - (digits - 1))
    return np.round(x / scale) * scale


def _layout_from(table, i, seq, global_batch, optimizer, dtype, moe_capacity=1,
                 optimizer_impl: str = "foreach", schedule: str = "") -> Layout:
    pipelined = table["pp"][i] > 1
    return Layout(first_stage_layers=int(table["first_layers"][i]) if pipelined else 0,
                  last_stage_layers=int(table["last_layers"][i]) if pipelined else 0,
                  schedule=schedule if pipelined else "",micro_batch=int(table["micro_batch"][i]), seq=seq, tp=int(table["tp"][i]),
                  pp=int(table["pp"][i]), dp=int(table["dp"][i]), sp=bool(table["sp"][i]),
                  recompute=RECOMPUTE_ORDER[table["recompute"][i]], zero=int(table["zero"][i]),
                  optimizer=optimizer, interleave=int(table["interleave"][i]), dtype=dtype,
                  global_batch=global_batch, cp=int(table["cp"][i]), ep=int(table["ep"][i]),
                  etp=0 if table["etp"][i] == table["tp"][i] else int(table["etp"][i]),
                  moe_capacity=Fraction(moe_capacity), optimizer_impl=optimizer_impl)
