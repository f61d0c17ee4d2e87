"""The numbers of a bill: its derived lines evaluated exactly, without sympy.

:func:`symbolic.bill.derive.derive` turns a model's inventories and a layout into a
:class:`DerivedBill` — every line's formula as text in the papers' letters
(``sympy.sstr``), with its source and condition. :func:`evaluate` substitutes
the dimension values with Python's :class:`~fractions.Fraction`, through the
guarded formula reader, so a derivation read back from the cache
(:mod:`symbolic.bill.cache`) prints without importing sympy. Both paths evaluate
the same text in the same way: ``make_bill`` is ``evaluate(derive(...))``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

from ..core.expressions import evaluate_formula, exact_values
from ..layout.experts import expert_groups
from ..layout.layout import Layout
from ..layout.stages import exact_stages, stage_key_rank, stage_words, verdict_mixes  # loaded with the layout (layout.layout imports it)
from ..models.config import BILLED_ARCHITECTURES, ConfigError, ModelConfig  # noqa: F401 (re-exported for the bill)
from ..models.structure import Structure, structure_of

#: The ledgers of a bill, in the order they print. ``verdict``: the classes of the step's peak
#: instant on the busiest stage (:mod:`symbolic.ledgers.peak`), added by :func:`evaluate`.
LEDGERS = ("params", "model_states", "activations", "flops", "output_side", "communication", "verdict",
           "cpu_memory")

#: Keys of :attr:`DerivedBill.formulas` holding the verdict's candidate instants:
#: ``peak|STAGE|PHASE|CLASS``.
PEAK_PREFIX = "peak|"
#: The classes of an instant, in the order they print (``symbolic.ledgers.peak.CLASSES``).
PEAK_CLASSES = ("model_states", "activations", "output_side", "transients", "communication")


@dataclass(frozen=True)
class Line:
    """One item of a ledger: its exact value, the formula it came from (text in
    the papers' letters), its source and its condition."""

    ledger: str
    name: str
    formula: str
    value: Fraction | int
    source: str
    condition: str = ""
    per_micro_batch: str = ""  #: FLOPs lines: the formula of one micro-batch (``formula`` = it × micro_batches)
    micro_batches: int = 0     #: FLOPs lines: the micro-batches of one iteration, all data-parallel ranks

    @property
    def expr(self):
        """The formula as a sympy expression (imports sympy)."""
        from ..core.dims import SYMBOLS
        from ..core.expressions import parse_formula

        return parse_formula(self.formula, SYMBOLS)


@dataclass
class Bill:
    model: ModelConfig
    layout: Layout
    values: dict[str, int]
    lines: list[Line]
    totals: dict[str, int | Fraction | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    strategy: str = ""  #: the activation strategy in words (``Strategy.describe``)
    #: what the verdict leaves out: (item, estimated bytes, source)
    not_counted: list[tuple[str, int, str]] = field(default_factory=list)
    #: when it does not fit: the levers that would make it fit (``symbolic.bill.levers``), and their order
    fixes: list = field(default_factory=list)
    fix_policy: str = ""

    def ledger(self, name: str) -> list[Line]:
        return [line for line in self.lines if line.ledger == name]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)  # a copy or a pickle holds the lines themselves, never the pending builder
        state["_lines"] = self.lines
        return state


class _PendingLines:
    """A bill's lines before they are built: :func:`evaluate` has every number already (the totals are
    sums of them), and a loop that reads ``bill.totals`` only (a plan's check, a benchmark) never needs
    the few dozen :class:`Line` objects; ``bill.lines`` builds them on first read, the same lines."""

    __slots__ = ("build",)

    def __init__(self, build) -> None:
        self.build = build


def _bill_lines(bill: Bill) -> list[Line]:
    lines = bill.__dict__["_lines"]
    if type(lines) is _PendingLines:
        lines = bill.__dict__["_lines"] = lines.build()
    return lines


def _set_bill_lines(bill: Bill, lines) -> None:
    bill.__dict__["_lines"] = lines


#: ``Bill.lines``: a field (the dataclass's __init__, repr and == go through it), built on first read.
Bill.lines = property(_bill_lines, _set_bill_lines, doc="Every line of the bill, ledger by ledger, then the verdict's.")


@dataclass(frozen=True)
class DerivedLine:
    ledger: str
    name: str
    formula: str
    source: str
    condition: str = ""
    per_micro_batch: str = ""
    micro_batches: int = 0


@dataclass(frozen=True)
class DerivedBill:
    """A bill before numbers: its lines and the formulas of the totals that are
    not sums of lines (``params``, ``params_eq2``, ``model_flops``, and
    ``params_active`` for a mixture of experts)."""

    lines: tuple[DerivedLine, ...]
    formulas: dict[str, str]
    strategy: str = ""

    def to_json(self) -> str:
        return "".join(self.json_fragments())

    def json_fragments(self) -> list[str]:
        """:meth:`to_json`'s text in pieces whose concatenation it is: ``json.dumps`` of the lines (each
        line's fields in order, as ``dataclasses.asdict`` writes them), the formulas and the strategy. A
        line or a formula of the usual types (str, and an int count) is written once per process
        (:func:`_line_json`): the kinds of a loop share most of them, and the encoding was most of a
        write to the disk cache. Anything else goes through ``json.dumps`` whole, as before."""
        if not (all(_plain_line(line) for line in self.lines) and type(self.formulas) is dict
                and all(type(k) is str and type(v) is str for k, v in self.formulas.items())
                and type(self.strategy) is str):
            return [json.dumps({"lines": [_line_dict(line) for line in self.lines], "formulas": self.formulas,
                                "strategy": self.strategy})]
        # json.dumps's own layout of {"lines": [...], "formulas": {...}, "strategy": ...} (separators ", ", ": ")
        out = ['{"lines": [']
        for i, line in enumerate(self.lines):
            if i:
                out.append(", ")
            out.append(_line_json(line))
        out.append('], "formulas": {')
        for i, item in enumerate(self.formulas.items()):
            if i:
                out.append(", ")
            out.append(_item_json(item))
        out.append('}, "strategy": ')
        out.append(json.dumps(self.strategy))
        out.append("}")
        return out

    @classmethod
    def from_json(cls, text: str) -> "DerivedBill":
        data = json.loads(text)
        return cls(tuple(DerivedLine(**line) for line in data["lines"]), dict(data["formulas"]), data["strategy"])


def _plain_line(line: DerivedLine) -> bool:
    """Whether ``line``'s fields are of the types :func:`_line_json` memoises (a str is its text, an int
    its digits: a bool or a subclass, equal to it and hashed alike, would be written otherwise)."""
    return (type(line.ledger) is str and type(line.name) is str and type(line.formula) is str
            and type(line.source) is str and type(line.condition) is str and type(line.per_micro_batch) is str
            and type(line.micro_batches) is int)


def _line_dict(line: DerivedLine) -> dict:
    """One line's fields in order, as ``dataclasses.asdict`` writes them (without its deep copy)."""
    return {"ledger": line.ledger, "name": line.name, "formula": line.formula, "source": line.source,
            "condition": line.condition, "per_micro_batch": line.per_micro_batch, "micro_batches": line.micro_batches}


@lru_cache(maxsize=1 << 14)
def _line_json(line: DerivedLine) -> str:
    """``json.dumps`` of one line's fields in order (a line of :func:`_plain_line`'s types)."""
    return json.dumps(_line_dict(line))


@lru_cache(maxsize=1 << 14)
def _item_json(item: tuple[str, str]) -> str:
    """One formula of :attr:`DerivedBill.formulas` as ``json.dumps`` writes a dict's item."""
    return f"{json.dumps(item[0])}: {json.dumps(item[1])}"


def structure(model: ModelConfig) -> Structure:
    """What of ``model`` the shape of its inventories depends on (not its
    numbers): the :class:`~symbolic.models.structure.Structure`
    :func:`architecture_inventories` is cached by."""
    return structure_of(model)


def layout_structure(model: ModelConfig, layout: Layout) -> Structure:
    """:func:`structure` with the layout's attention kernel (``Layout.flash_attention``: the fused
    kernel) and loss kernel (``Layout.loss``: the output side the step time prices), so every ledger
    built from it — the plan's expressions, the step time — sees the inventory the bill bills."""
    return structure_of(model, flash_attention=layout.flash_attention, loss=layout.loss)


@lru_cache(maxsize=1024)
def _structure_key(model: ModelConfig) -> tuple:
    """``structure(model).key()``, by model (frozen: a loop over layouts of one model builds it once)."""
    return structure(model).key()


def derivation_key(model: ModelConfig, layout: Layout, params_hand: int | None = None) -> dict:
    """Everything :func:`derive`'s text depends on (the key of the cache): the
    model's structure and the layout's strategy, recipe and ZeRO stage — not
    the dimension values, which only :func:`evaluate` substitutes. Its sequences are tuples (hashable:
    :func:`derivation_memo_key`), written as JSON arrays in the disk cache's key."""
    key = {"structure": _structure_key(model), "sp": layout.sp, "recompute": layout.recompute,
            "dtype": layout.dtype, "pipeline": layout.pp > 1, "interleaved": layout.interleave > 1,
            "optimizer": layout.optimizer, "zero": layout.zero, "hand_filled": params_hand is not None,
            "context_parallel": layout.cp > 1, "expert_parallel": layout.ep > 1,
            "expert_tensor_parallel": layout.etp not in (0, layout.tp),
            "expert_capacity": (layout.moe_capacity if type(layout.moe_capacity) in (Fraction, int)
                                else Fraction(layout.moe_capacity)) != 1,
            "recompute_modules": tuple(layout.recompute_modules), "fused_swiglu": layout.fused_swiglu,
            "micro_batches": layout.iteration_micro_batches() * layout.dp,
            # the chunks in flight when the micro-batches per iteration cap them (the text holds the
            # integer), and the communication groups wider than one (their buffers are lines)
            "in_flight": (layout.in_flight_capped("first"), layout.in_flight_capped("last")) if layout.pp > 1 else None,
            "comm": (layout.tp > 1, layout.dp > 1, layout.pp > 1, layout.cp > 1,
                     # the expert grid's own communicators (EP, expert TP ≠ t, expert DP ≠ d) hold buffers too
                     *[group for group, size in expert_groups(layout) if size > 1]),
            "levers": (layout.lora > 0, layout.lora_targets, layout.base_dtype, layout.double_quant, layout.offload,
                       layout.optimizer_impl, layout.flash_attention, layout.activation_offload)}
    # the choices most layouts leave at their defaults: keyed only when set (in this order)
    if layout.fp8_activations:
        key["fp8_activations"] = True
    if layout.precision != "bf16":  # the recipe's weight copies (a transpose cache on a TN-only GPU) are lines
        key["precision"] = (layout.precision, layout.fp8_transpose_cache)
    if layout.loss != "eager":
        key["loss"] = layout.loss
    if layout.uneven_stages:
        key["uneven_stages"] = True
    if layout.middle_stage:  # the middle stage's formulas, and its chunks in flight when capped
        key["middle_stage"] = (True, layout.in_flight_capped("middle"))
    if layout.moe_dispatcher != "hf":
        key["moe_dispatcher"] = layout.moe_dispatcher
    if layout.moe_pad_to_capacity:
        key["moe_pad_to_capacity"] = True
    if layout.sp_inputs != "sharded":
        key["sp_inputs"] = layout.sp_inputs
    if layout.own_schedule and layout.pp > 1:  # its chunk placement and parameter copies are in the text
        key["schedule"] = layout.schedule_name
    mix_key = _stage_mix_key(model, layout)
    if mix_key:
        key.update(mix_key)
    return key


def _stage_mix_key(model: ModelConfig, layout: Layout) -> dict:
    """A stage accounted by its own layers (``layout.stages``): the text holds its layer counts and
    moments as integers, so they key the derivation."""
    if not exact_stages(model, layout):
        return {}
    return {"stage_mix": tuple(tuple(map(repr, mix.key())) for _, mix in verdict_mixes(model, layout))}


def derivation_memo_key(key: dict) -> tuple:
    """:func:`derivation_key` as a hashable value, for a memo in the process: equal exactly when the keys
    are (each entry keeps its type from one call to the next; its sequences are tuples), without the JSON
    text the disk cache names its entries by (a loop over layouts looks a kind up per configuration)."""
    return tuple(key.items())


def _share(total: int | Fraction, ways: int) -> int | Fraction:
    """``whole(Fraction(total, ways))``: an int when ``ways`` divides an int total, without building the Fraction."""
    if type(total) is int:
        quotient, remainder = divmod(total, ways)
        if remainder == 0:
            return quotient
    return whole(Fraction(total, ways))


def whole(value: Fraction) -> int | Fraction:
    """Bytes are whole numbers when the sharding divides evenly; keep exact otherwise."""
    return value.numerator if value.denominator == 1 else value


@lru_cache(maxsize=1 << 14)
def _peak_where(key: str) -> tuple[str, ...]:
    """A ``peak|STAGE|PHASE|CLASS`` key's (STAGE, PHASE, CLASS): the kinds of a loop repeat them."""
    return tuple(key[len(PEAK_PREFIX):].split("|"))


def _line_fields(derived: DerivedLine) -> dict:
    """A line's fields in ``Line``'s order, its value None until :func:`_line_at` sets it; memoised by the
    line and its count's type (the kinds of a loop share most lines; a count read back as a JSON
    ``true`` is kept as it is), so the dict is shared: read and copied, never changed."""
    return _shared_line_fields(derived, type(derived.micro_batches))


@lru_cache(maxsize=1 << 14)
def _shared_line_fields(derived: DerivedLine, _count_type: type) -> dict:
    return {"ledger": derived.ledger, "name": derived.name, "formula": derived.formula, "value": None,
            "source": derived.source, "condition": derived.condition, "per_micro_batch": derived.per_micro_batch,
            "micro_batches": derived.micro_batches}


def _line_at(fields: dict, value, new=object.__new__, set_field=object.__setattr__) -> Line:
    """``Line(**fields, value=value)`` from a derivation's precomputed fields (:func:`_line_fields`): one
    dict copy, without the frozen dataclass's per-field ``object.__setattr__`` (a bill makes dozens per
    configuration). The instance is the same: equal, hashable and frozen as one built by ``Line(...)``."""
    line = new(Line)
    fields = fields.copy()
    fields["value"] = value
    set_field(line, "__dict__", fields)
    return line


@dataclass(frozen=True)
class _CompiledBill:
    """A derivation's formulas, each compiled once per process (:func:`~symbolic.core.expressions.formula_functions`):
    ``before_states`` gives params and the routed experts' params at the dimension values
    (``has_routed``: whether the model has routed experts); ``at_states`` every other distinct formula at them and Psi; ``line_slots``
    and ``slots`` say where each line's and each named total's number is; ``line_fields`` and
    ``ledger_slots`` build the lines and sum the ledgers; ``instants`` the verdict's candidates."""

    before_states: object
    has_routed: bool
    at_states: object
    line_slots: tuple[int, ...]
    slots: dict[str, int]
    #: each line's fields but its value (a placeholder in its place: the same key order as ``Line(...)``)
    line_fields: tuple[dict, ...] = ()
    #: ledger → the slots of its lines, in line order (the ledger's total is their sum)
    ledger_slots: tuple[tuple[str, tuple[int, ...]], ...] = ()
    #: the verdict's candidate instants, from the PEAK_PREFIX formulas in their order: ((stage, phase), the
    #: slots of its classes in formula order (their sum is the instant's bytes), and for each class of
    #: PEAK_CLASSES its (formula, slot), ("0", None) for a class the instant does not hold)
    instants: tuple = ()


#: Compiled derivations by id (the DerivedBill is kept with it, so the id stays its own).
_COMPILED_BILLS: dict[int, tuple[DerivedBill, _CompiledBill]] = {}


def _compiled(derived: DerivedBill) -> _CompiledBill:
    found = _COMPILED_BILLS.get(id(derived))
    if found is not None and found[0] is derived:
        return found[1]
    from ..core.expressions import formula_functions

    order: dict[str, int] = {}

    def slot(formula: str) -> int:
        return order.setdefault(formula, len(order))

    line_slots = tuple([slot(line.formula) for line in derived.lines])
    slots = {key: slot(derived.formulas[key]) for key in ("params_eq2", "model_flops", "params_per_gpu",
                                                           "params_active") if key in derived.formulas}
    peaks = tuple((*_peak_where(key), formula, slot(formula))
                  for key, formula in derived.formulas.items() if key.startswith(PEAK_PREFIX))
    by_ledger: dict[str, list[int]] = {}
    for line, i in zip(derived.lines, line_slots):
        by_ledger.setdefault(line.ledger, []).append(i)
    instants: dict[tuple[str, str], dict[str, tuple[str, int]]] = {}
    for stage, phase, cls, formula, i in peaks:
        instants.setdefault((stage, phase), {})[cls] = (formula, i)
    compiled = _CompiledBill(
        before_states=formula_functions((derived.formulas["params"], derived.formulas.get("params_routed_experts", "0"))),
        has_routed="params_routed_experts" in derived.formulas,
        at_states=formula_functions(order), line_slots=line_slots, slots=slots,
        line_fields=tuple([_line_fields(line) for line in derived.lines]),
        ledger_slots=tuple((ledger, tuple(found)) for ledger, found in by_ledger.items()),
        instants=tuple((where, tuple(i for _, i in parts.values()),
                        tuple(parts.get(cls, ("0", None)) for cls in PEAK_CLASSES))
                       for where, parts in instants.items()))
    if len(_COMPILED_BILLS) >= 4096:
        _COMPILED_BILLS.clear()
    _COMPILED_BILLS[id(derived)] = (derived, compiled)
    return compiled


#: The verdict lines' source (:func:`evaluate`).
VERDICT_SOURCE = "seed 004 §02–§03; symbolic.ledgers.peak"


def evaluate(derived: DerivedBill, model: ModelConfig, layout: Layout, params_hand: int | None = None,
             gpu_memory: int | None = None, cpu_memory: int | None = None) -> Bill:
    """The bill's numbers: every line and total of ``derived`` at the model's
    and the layout's dimension values, exactly."""
    values = exact_values(layout.values(model))
    compiled = _compiled(derived)
    params_config, routed = (whole(v) for v in compiled.before_states(values))
    routed = routed if compiled.has_routed else None
    if routed is not None and params_hand is not None and params_hand < routed:
        raise ConfigError(f"--params {params_hand:,} is below the routed experts' own {routed:,} parameters: the "
                          "model states split Psi into the dense part (Psi minus the experts) and the experts; "
                          "give at least the experts' count")
    n_states = params_hand if params_hand is not None else params_config
    # The model states are per Psi: the hand-filled N or the config count. Every other formula is
    # evaluated in one call of the derivation's compiled function (a formula many lines share once).
    numbers = [v if type(v) is int else whole(v) for v in compiled.at_states(dict(values, Psi=n_states))]
    # each ledger's lines summed in line order from 0 (exact: ints, or Fractions where a share is not whole)
    # (sum: from 0, left to right, as a loop of +; exact numbers only, so no float's rounding order)
    number = numbers.__getitem__
    ledger_sums: dict[str, int | Fraction] = {ledger: sum(map(number, found)) for ledger, found in compiled.ledger_slots}
    slots = compiled.slots

    states_bytes, activation_bytes = ledger_sums.get("model_states", 0), ledger_sums.get("activations", 0)
    hardware_flops = whole(ledger_sums.get("flops", 0))
    micro_batches = layout.iteration_micro_batches() * layout.dp
    gpus = layout.gpus  # t·p·d·c: the whole model's FLOPs are the same with CP, spread over c times the GPUs
    totals = {
        "params": params_config,
        "params_eq2": numbers[slots["params_eq2"]] if "params_eq2" in slots else None,
        "params_hand": params_hand,
        "params_for_states": n_states,
        "model_states_bytes": whole(states_bytes),
        "activation_bytes": whole(activation_bytes),
        "output_side_bytes": whole(ledger_sums.get("output_side", 0)),
        "gpu_memory_bytes": gpu_memory,
        "flops_per_iteration": hardware_flops,
        "model_flops_per_iteration": numbers[slots["model_flops"]] if "model_flops" in slots else None,
        "flops_per_gpu_per_iteration": _share(hardware_flops, gpus),
        "tokens_per_iteration": micro_batches * values["b"] * values["s"],
        "gpus": gpus,
    }
    if routed is not None:  # the routed experts' share of params, on the expert grid (the rest: the dense part)
        totals["params_routed_experts"] = routed
    if "params_per_gpu" in slots:  # the parameters one GPU holds, on the stage accounted
        totals["params_per_gpu"] = numbers[slots["params_per_gpu"]]
    if "params_active" in slots:  # seed 001 §07: N_total for the states, N_active for the FLOPs
        totals["params_active"] = numbers[slots["params_active"]]
    paper_total = states_bytes + activation_bytes
    totals["paper_total_bytes"] = whole(paper_total)
    verdict = None
    if compiled.instants:
        # The verdict: the largest candidate instant over the stages (ledgers.peak), each the sum of its
        # classes in formula order; the first of equal ones (stage order).
        best = best_sum = None
        stage_peaks: dict[str, int | Fraction] = {}
        for instant in compiled.instants:
            instant_sum = sum(map(number, instant[1]))
            if best is None or instant_sum > best_sum:
                best, best_sum = instant, instant_sum
            stage = instant[0][0]
            if stage not in stage_peaks or instant_sum > stage_peaks[stage]:
                stage_peaks[stage] = instant_sum
        (stage, phase), _, parts = best
        totals["total_bytes"] = whole(best_sum)
        totals["verdict_stage"] = stage
        totals["verdict_phase"] = phase
        for name in ("first", "last"):
            if name in stage_peaks:
                totals[f"peak_{name}_stage_bytes"] = whole(stage_peaks[name])
        middles = [value for name, value in stage_peaks.items() if name not in ("first", "last")]
        if middles:  # the stages between (uneven or per-chunk): the largest of their peaks
            totals["peak_middle_stage_bytes"] = whole(max(middles))
        if stage not in ("first", "last"):  # a middle stage: its rank and its name in words
            totals["verdict_stage_rank"] = stage_key_rank(stage, layout.pp)
            totals["verdict_stage_words"] = stage_words(stage, layout.pp)
        # the one breakdown every output prints (text, bar, notebook, --json): what is alive at the verdict's
        # instant, class by class, summing to total_bytes
        parts = tuple((formula, 0 if i is None else numbers[i]) for formula, i in parts)
        totals["verdict_parts"] = {cls: whole(value) for cls, (_, value) in zip(PEAK_CLASSES, parts)}
        where = (f"{stage} pipeline stage" if stage in ("first", "last") else f"pipeline {stage_words(stage, layout.pp)}")
        verdict = (f"alive at the peak: {where}, {phase}" if layout.pp > 1 else f"alive at the peak: {phase}", parts)
    else:  # a derivation without the verdict's formulas (none is written so): the papers' total
        totals["total_bytes"] = whole(paper_total)
    if gpu_memory is not None:
        totals["headroom_bytes"] = gpu_memory - totals["total_bytes"]
    totals["cpu_bytes"] = whole(ledger_sums.get("cpu_memory", 0))
    if cpu_memory is not None:
        totals["cpu_memory_bytes"] = cpu_memory
        totals["cpu_headroom_bytes"] = cpu_memory - totals["cpu_bytes"]
    notes = []
    if layout.lora:
        notes.append("LoRA: frozen weights skip their weight-gradient matmuls (the FLOPs lines count forward + "
                     "input gradient) and the adapters' matmuls are their own lines; the step time too, its "
                     "optimizer step and data-parallel reduce over the adapters only"
                     + (f", the {layout.base_dtype} base's dequantisation a memory pass per weight read"
                        if layout.base_dtype != "bf16" else ""))
    if layout.pp > 1 and layout.own_schedule:
        from ..layout.schedules import W_PENDING, describe, simulated_micro_batches, w_pending_at_peak
        plan = layout.pipeline_schedule()
        sizes = ""
        if plan.splits_backward:
            m_sim = simulated_micro_batches(plan, layout.pp, layout.iteration_micro_batches())
            sizes = "; " + ", ".join(
                f"{name} stage: {w_pending_at_peak(plan, layout.pp, layout.interleave, m_sim, rank)} of its "
                f"{layout.in_flight(name)} instances at its fullest are W-pending"
                for name, rank in (("first", 0), ("last", layout.pp - 1)))
        notes.append(f"schedule {describe(plan, layout.interleave)}; in flight: the most chunk instances its order "
                     f"holds ({plan.source})" + (f"; {W_PENDING}{sizes}" if plan.splits_backward else ""))
    if params_hand is not None and layout.lora:
        notes.append("LoRA: the model states count the inventory's parameters, not the hand-filled N")
    if params_hand is not None:
        diff = params_hand - params_config
        notes.append(f"hand-filled N = {params_hand:,} differs from the config count {params_config:,} by "
                     f"{diff:+,} params ({float(Fraction(diff, params_config) * 100):+.2f}% of the config count)")

    def build_lines() -> list[Line]:
        lines = [_line_at(fields, numbers[i]) for fields, i in zip(compiled.line_fields, compiled.line_slots)]
        if verdict is not None:
            condition, parts = verdict
            lines.extend(Line("verdict", f"peak/{cls}", formula, whole(value), VERDICT_SOURCE, condition)
                         for cls, (formula, value) in zip(PEAK_CLASSES, parts))
        return lines

    return Bill(model, layout, values, _PendingLines(build_lines), totals, notes, derived.strategy,
                not_counted(values, layout))


#: The bill's estimate of the CUDA context and the kernel workspaces (its ``not_counted`` line): CUDA 12's
#: context 0.3–0.5 GB and cuBLAS's workspace per stream. plan and solve keep it as their default margin.
CUDA_CONTEXT_BYTES = 500_000_000
#: The bill's fragmentation estimate (``not_counted``): none statically; ``timeline`` models the allocator.
FRAGMENTATION_BYTES = 0


def default_margin() -> int:
    """plan's and solve's default margin: what the bill lists as not counted and the same for every
    layout — the CUDA context and workspaces (:data:`CUDA_CONTEXT_BYTES`) and fragmentation
    (:data:`FRAGMENTATION_BYTES`); the embedding's activations the verdict leaves out depend on the layout
    and stay a ``not_counted`` line."""
    return CUDA_CONTEXT_BYTES + FRAGMENTATION_BYTES


def margin_bytes(text, gpu_memory: int) -> int:
    """``--margin`` / ``margin=``: '0', '4GB', '10%' (of the GPU memory) -> bytes
    (:func:`symbolic.layout.options.parse_memory_or_share`); None: :func:`default_margin`. Here, below the
    commands, so that the CLI and the Python API read a margin with the same code."""
    if text is None:
        return default_margin()
    from ..layout.options import parse_memory_or_share

    return parse_memory_or_share(text, gpu_memory, "--margin")


def not_counted(values: dict[str, int], layout: Layout) -> list[tuple[str, int, str]]:
    """What the verdict leaves out, with an estimate of each (see ``symbolic.ledgers.peak.not_counted``,
    mirrored here without sympy: the embedding's dropout mask s·b·h and int64 ids 8·s·b per micro-batch
    in flight on the first stage; the CUDA context and workspaces; fragmentation)."""
    tokens = values["s"] // values.get("c", 1) * values["b"]
    chunks = layout.in_flight("first")
    mask = tokens * values["h"] // (layout.tp if layout.sp else 1)  # SP splits the embedding's dropout by t
    return [("embedding activations (dropout mask 1 B + int64 token ids, per micro-batch in flight)",
             chunks * (mask + 8 * tokens), "Korthikanti §4.3 (first stage only)"),
            ("CUDA context and kernel workspaces (cuBLAS, NCCL kernels)", CUDA_CONTEXT_BYTES,
             "estimate: CUDA 12 context 0.3–0.5 GB + cuBLAS workspace per stream"),
            ("allocator fragmentation (reserved − allocated)", FRAGMENTATION_BYTES,
             "not estimated here: `symbolic timeline` models the caching allocator (seed 004 §04)")]
