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
from dataclasses import asdict, dataclass, field
from fractions import Fraction

from ..core.expressions import evaluate_formula
from ..layout.layout import Layout
from ..models.config import BILLED_ARCHITECTURES, ConfigError, ModelConfig  # noqa: F401 (re-exported for the bill)

#: The ledgers of a bill, in the order they print.
LEDGERS = ("params", "model_states", "activations", "flops", "output_side")


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

    def ledger(self, name: str) -> list[Line]:
        return [line for line in self.lines if line.ledger == name]


@dataclass(frozen=True)
class DerivedLine:
    ledger: str
    name: str
    formula: str
    source: str
    condition: str = ""


@dataclass(frozen=True)
class DerivedBill:
    """A bill before numbers: its lines and the formulas of the totals that are
    not sums of lines (``params``, ``params_eq2``, ``model_flops``, and
    ``params_active`` for a mixture of experts)."""

    lines: tuple[DerivedLine, ...]
    formulas: dict[str, str]
    strategy: str = ""

    def to_json(self) -> str:
        return json.dumps({"lines": [asdict(line) for line in self.lines], "formulas": self.formulas,
                           "strategy": self.strategy})

    @classmethod
    def from_json(cls, text: str) -> "DerivedBill":
        data = json.loads(text)
        return cls(tuple(DerivedLine(**line) for line in data["lines"]), dict(data["formulas"]), data["strategy"])


def structure(model: ModelConfig) -> tuple:
    """What of ``model`` the shape of its inventories depends on (not its
    numbers): the key :func:`architecture_inventories` is cached by."""
    return model.arch, bool(model.ffn), model.tied, model.positions, bool(model.shared_experts)


def derivation_key(model: ModelConfig, layout: Layout, params_hand: int | None = None) -> dict:
    """Everything :func:`derive`'s text depends on (the key of the cache): the
    model's structure and the layout's strategy, recipe and ZeRO stage — not
    the dimension values, which only :func:`evaluate` substitutes."""
    return {"structure": list(structure(model)), "sp": layout.sp, "recompute": layout.recompute,
            "dtype": layout.dtype, "pipeline": layout.pp > 1, "interleaved": layout.interleave > 1,
            "optimizer": layout.optimizer, "zero": layout.zero, "hand_filled": params_hand is not None,
            "context_parallel": layout.cp > 1, "expert_parallel": layout.ep > 1,
            "expert_tensor_parallel": layout.etp not in (0, layout.tp),
            "expert_capacity": Fraction(layout.moe_capacity) != 1,
            "recompute_modules": list(layout.recompute_modules), "fused_swiglu": layout.fused_swiglu,
            "micro_batches": layout.iteration_micro_batches() * layout.dp,
            **({"fp8_activations": True} if layout.fp8_activations else {}),
            **({"uneven_stages": True} if layout.uneven_stages else {})}


def whole(value: Fraction) -> int | Fraction:
    """Bytes are whole numbers when the sharding divides evenly; keep exact otherwise."""
    return value.numerator if value.denominator == 1 else value


def evaluate(derived: DerivedBill, model: ModelConfig, layout: Layout, params_hand: int | None = None,
             gpu_memory: int | None = None) -> Bill:
    """The bill's numbers: every line and total of ``derived`` at the model's
    and the layout's dimension values, exactly."""
    values = layout.values(model)
    params_config = whole(evaluate_formula(derived.formulas["params"], values))
    routed = (whole(evaluate_formula(derived.formulas["params_routed_experts"], values))
              if "params_routed_experts" in derived.formulas else None)
    if routed is not None and params_hand is not None and params_hand < routed:
        raise ConfigError(f"--params {params_hand:,} is below the routed experts' own {routed:,} parameters: the "
                          "model states split Psi into the dense part (Psi minus the experts) and the experts; "
                          "give at least the experts' count")
    n_states = params_hand if params_hand is not None else params_config
    at = dict(values, Psi=n_states)  # the model states are per Psi: the hand-filled N or the config count
    lines = [Line(d.ledger, d.name, d.formula, whole(evaluate_formula(d.formula, at)), d.source, d.condition)
             for d in derived.lines]

    def total(ledger: str) -> Fraction:
        return sum((Fraction(line.value) for line in lines if line.ledger == ledger), Fraction(0))

    states_bytes, activation_bytes = total("model_states"), total("activations")
    hardware_flops = whole(total("flops"))
    micro_batches = layout.iteration_micro_batches() * layout.dp
    gpus = layout.gpus  # t·p·d·c: the whole model's FLOPs are the same with CP, spread over c times the GPUs
    totals = {
        "params": params_config,
        "params_eq2": whole(evaluate_formula(derived.formulas["params_eq2"], values)),
        "params_hand": params_hand,
        "params_for_states": n_states,
        "model_states_bytes": whole(states_bytes),
        "activation_bytes": whole(activation_bytes),
        "total_bytes": whole(states_bytes + activation_bytes),
        "output_side_bytes": whole(total("output_side")),
        "gpu_memory_bytes": gpu_memory,
        "flops_per_iteration": hardware_flops,
        "model_flops_per_iteration": whole(evaluate_formula(derived.formulas["model_flops"], values)),
        "flops_per_gpu_per_iteration": whole(Fraction(hardware_flops, gpus)),
        "tokens_per_iteration": micro_batches * values["b"] * values["s"],
        "gpus": gpus,
    }
    if routed is not None:  # the routed experts' share of params, on the expert grid (the rest: the dense part)
        totals["params_routed_experts"] = routed
    if "params_per_gpu" in derived.formulas:  # the parameters one GPU holds, on the stage accounted
        totals["params_per_gpu"] = whole(evaluate_formula(derived.formulas["params_per_gpu"], values))
    if "params_active" in derived.formulas:  # seed 001 §07: N_total for the states, N_active for the FLOPs
        totals["params_active"] = whole(evaluate_formula(derived.formulas["params_active"], values))
    if gpu_memory is not None:
        totals["headroom_bytes"] = gpu_memory - totals["total_bytes"]
    notes = []
    if params_hand is not None:
        diff = params_hand - params_config
        notes.append(f"hand-filled N = {params_hand:,} differs from the config count {params_config:,} by "
                     f"{diff:+,} params ({float(Fraction(diff, params_config) * 100):+.2f}% of the config count)")
    return Bill(model, layout, values, lines, totals, notes, derived.strategy)
