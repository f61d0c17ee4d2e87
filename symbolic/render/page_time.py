"""The step time as an expression: :func:`symbolic.ledgers.time.price` run once on symbols, for the
calculator page (issue 23 item 5).

``price`` is written over :mod:`symbolic.ledgers.arrays`, whose third backend builds sympy expressions
when its arguments are sympy (``where``/``maximum``/``minimum`` unevaluated functions, ``Table.nearest``
the function ``nearest_efficiency(table, dims…)``). Called with the layout's letters (t p d v b B s) as
symbols and each of ``TimeDerivation.expressions()`` as a symbol ``n_i`` (a number where the expression
is one), it returns the step time and each part of its breakdown as expressions of those symbols — the
bill's own pricing code, every branch kept as a selection, no second copy of the model. The page
evaluates the ``n_i`` from the derivation's expressions (its letters) and then this expression.

Condition: the pipeline's stages even (``pacing_stage`` needs L_1 and L_p: uneven stages are not a page
input) and no context parallelism (c = 1: no page input either).
"""
from __future__ import annotations

from dataclasses import dataclass

#: The layout's letters ``price`` reads (c is 1 on the page: no context-parallel input).
PRICE_LETTERS = ("t", "p", "d", "v", "b", "B", "s")
#: The breakdown's parts, in ``price``'s order (``StepTime.breakdown``).
PARTS = ("compute", "elementwise", "tp_exposed", "cp_exposed", "ep_exposed", "pp_exposed", "bubble",
         "dp_exposed", "zero3_exposed", "overlap_slowdown", "optimizer")
#: What :func:`priced` returns, in order: the step, its parts, the model and hardware FLOPs per GPU.
OUTPUTS = ("step", *PARTS, "model_flops", "hardware_flops")


def number_symbol(index: int):
    from sympy import Symbol
    return Symbol(f"n{index}", real=True)


def shell_numbers(expressions) -> list:
    """``n_i`` for each of ``TimeDerivation.expressions()``, the expression itself where it is a number
    (a pass count, a call's group of one: ``price``'s branches on it fold away)."""
    return [x if x.is_Number else number_symbol(i) for i, x in enumerate(expressions)]


@dataclass(frozen=True)
class PricedTime:
    """The step time of one derivation shell on one GPU kind as expressions (:data:`OUTPUTS`) of the
    letters and the ``n_i``; ``factors`` as ``price`` names them (the kernel tables, the overlap)."""

    outputs: tuple
    factors: dict
    peak: float


def priced(derivation, numbers, hardware, gemm_dtype: str = "bf16") -> PricedTime:
    """``price`` on symbols: ``numbers`` the values of ``derivation.expressions()`` (symbols, or the
    expressions themselves), the letters :data:`PRICE_LETTERS` as the dimension symbols."""
    from ..core.dims import SYMBOLS
    from ..ledgers.time import price

    letters = {name: SYMBOLS[name] for name in PRICE_LETTERS}
    step = price(derivation, list(numbers), letters, hardware, gemm_dtype=gemm_dtype)
    outputs = (step.step_seconds, *(step.breakdown[name] for name in PARTS), step.model_flops, step.hardware_flops)
    return PricedTime(outputs, step.factors, step.peak)


def evaluate(expr, values: dict) -> float:
    """``expr`` at ``values`` (names → numbers) as a float: every symbol replaced, the backend's functions
    evaluated by the numeric rules."""
    from sympy import Integer, sympify

    expr = sympify(expr)
    numbers = {x: (Integer(values[x.name]) if isinstance(values[x.name], int) else values[x.name])
               for x in expr.free_symbols}
    return float(expr.xreplace(numbers))


__all__ = ["OUTPUTS", "PARTS", "PRICE_LETTERS", "PricedTime", "evaluate", "priced", "shell_numbers"]
