"""Units and exact rounding, in plain Python (``fractions``, ``decimal``).

GB means 10^9 bytes and GiB 2^30 bytes (seed 001 §4); every printed number
carries its unit. No sympy here: the bill's cached path prints with these
without importing it. ``symbolic.core.numeric`` re-exports them for the engine.
"""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

#: The size of each unit in its base unit (bytes, FLOPs, parameters, or 1).
UNIT_SIZES: dict[str, int | Fraction] = {
    "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
    "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "FLOPs": 1, "GFLOPs": 10**9, "TFLOPs": 10**12, "PFLOPs": 10**15, "EFLOPs": 10**18,
    "params": 1, "billion": 10**9,
    "%": Fraction(1, 100), "1": 1,
}


def as_fraction(value) -> Fraction:
    """An exact value as a :class:`~fractions.Fraction`: ints, Fractions,
    Decimals, floats (their exact binary value) and sympy Rationals (read
    through their ``p``/``q``)."""
    if isinstance(value, (int, Fraction, Decimal, float)):
        return Fraction(value)
    numerator, denominator = getattr(value, "p", None), getattr(value, "q", None)
    if numerator is None or denominator is None:
        raise TypeError(f"not an exact number: {value!r}")
    return Fraction(int(numerator), int(denominator))


def in_unit(value, unit: str) -> Fraction:
    """``value`` (in base units) expressed in ``unit``, exactly."""
    if unit not in UNIT_SIZES:
        raise ValueError(f"unknown unit {unit!r}; use one of {', '.join(UNIT_SIZES)}")
    return as_fraction(value) / UNIT_SIZES[unit]


def round_half_up(value, decimals: int) -> Decimal:
    """Round an exact value to ``decimals`` places, halves away from zero
    (negative ``decimals``: to tens, hundreds, ... — a stated "≈ 230")."""
    scaled = as_fraction(value) * Fraction(10) ** decimals
    magnitude = abs(scaled)
    digits = (2 * magnitude.numerator + magnitude.denominator) // (2 * magnitude.denominator)
    digits = -digits if scaled < 0 else digits
    return Decimal(digits * 10**-decimals) if decimals < 0 else Decimal(digits).scaleb(-decimals)


def fmt(value, unit: str, decimals: int = 2) -> str:
    """``value`` (in base units) printed in ``unit`` with ``decimals`` places."""
    number = round_half_up(in_unit(value, unit), decimals)
    text = f"{number:,.{decimals}f}"
    return f"{text}%" if unit == "%" else f"{text} {unit}"


def fmt_bytes(value, decimals: int = 2) -> str:
    """A byte count in both units, decimal first: ``52.08 GB (48.50 GiB)``."""
    return f"{fmt(value, 'GB', decimals)} ({fmt(value, 'GiB', decimals)})"
