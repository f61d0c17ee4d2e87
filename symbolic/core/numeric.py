"""Exact evaluation, units and vectorised sweeps.

Bytes and FLOPs stay integers or Rationals until they are printed. GB means
10^9 bytes and GiB 2^30 bytes (seed 001 §4); every printed number carries its
unit (the unit table and the rounding live in :mod:`symbolic.core.units`).
"""
from __future__ import annotations

from typing import Mapping

from sympy import Expr, Integer, Rational, Symbol, sympify

from .dims import SYMBOLS
from .units import UNIT_SIZES, as_fraction, fmt, in_unit, round_half_up  # noqa: F401 (re-exported)

#: Unit sizes as sympy numbers, for the engine's exact arithmetic (the table is ``units.UNIT_SIZES``).
UNITS: dict[str, int | Rational] = {
    name: size if isinstance(size, int) else Rational(size.numerator, size.denominator)
    for name, size in UNIT_SIZES.items()
}


class EvaluationError(ValueError):
    """An expression could not be evaluated to a number."""


def substitute(expr: Expr, values: Mapping[str | Symbol, int | Rational]) -> Expr:
    """Replace dimension symbols by exact values (names or symbols as keys)."""
    mapping = {}
    for key, value in values.items():
        symbol = SYMBOLS[key] if isinstance(key, str) else key
        mapping[symbol] = Integer(value) if isinstance(value, int) else Rational(value)
    return sympify(expr).xreplace(mapping)


def exact(expr: Expr, values: Mapping[str | Symbol, int | Rational]) -> Rational:
    """The exact value of ``expr`` at ``values``; every free symbol must be given."""
    result = substitute(expr, values)
    if result.free_symbols:
        missing = ", ".join(sorted(str(x) for x in result.free_symbols))
        raise EvaluationError(f"no value given for {missing}")
    if not result.is_Rational:
        raise EvaluationError(f"{expr} does not evaluate to a rational number at {dict(values)}")
    return result


def exact_int(expr: Expr, values: Mapping[str | Symbol, int | Rational]) -> int:
    """:func:`exact`, required to be an integer (bytes, FLOPs, parameters)."""
    result = exact(expr, values)
    if not result.is_Integer:
        raise EvaluationError(f"{expr} is {result} at {dict(values)}, not a whole number")
    return int(result)


def vectorize(expr: Expr, symbols: list[Symbol]):
    """A numpy function of ``symbols`` for sweeps (floats: for plots and plans).

    ``lambdify`` does not complain about a symbol missing from its argument list
    and then returns arrays of sympy objects, so the free symbols are checked.
    """
    from sympy import lambdify

    missing = expr.free_symbols - set(symbols)
    if missing:
        raise EvaluationError(f"vectorize: {sorted(map(str, missing))} not among the arguments")
    return lambdify(symbols, expr, "numpy", cse=True)
