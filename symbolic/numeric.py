"""Units, exact evaluation and vectorised sweeps.

Bytes and FLOPs stay integers or Rationals until they are printed. GB means
10^9 bytes and GiB 2^30 bytes (seed 001 §4); every printed number carries its
unit.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Mapping

from sympy import Expr, Integer, Rational, Symbol, floor, sympify

from .dims import SYMBOLS

UNITS: dict[str, int] = {
    "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
    "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "FLOPs": 1, "GFLOPs": 10**9, "TFLOPs": 10**12, "PFLOPs": 10**15, "EFLOPs": 10**18,
    "params": 1, "billion": 10**9,
    "%": Rational(1, 100), "1": 1,
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


def in_unit(value: Rational | int, unit: str) -> Rational:
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; use one of {', '.join(UNITS)}")
    return Rational(value) / UNITS[unit]


def round_half_up(value: Rational, decimals: int) -> Decimal:
    """Round an exact value to ``decimals`` places, halves away from zero."""
    scaled = Rational(value) * 10**decimals
    sign = -1 if scaled < 0 else 1
    digits = int(floor(abs(scaled) + Rational(1, 2)))
    return Decimal(sign * digits).scaleb(-decimals)


def fmt(value: Rational | int, unit: str, decimals: int = 2) -> str:
    """``value`` (in base units) printed in ``unit`` with ``decimals`` places."""
    number = round_half_up(in_unit(value, unit), decimals)
    text = f"{number:,.{decimals}f}"
    return f"{text}%" if unit == "%" else f"{text} {unit}"


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
