"""The concrete flag change a layout refusal names: sizes that divide what they must, found by
arithmetic, so that the fix works when applied as written (``try `--dp 8```).

Each function returns the smallest change of one option that satisfies the rule it serves; the
refusals in :mod:`symbolic.layout.layout`, :mod:`.experts` and :mod:`.stages` quote it.
"""
from __future__ import annotations

from math import gcd


def largest_divisor(cap: int, *numbers: int, floor: int = 1) -> int | None:
    """The largest k in [floor, cap] dividing every one of ``numbers`` (None: there is none): the
    divisors of their gcd, found up to its square root — never a count down from ``cap`` (a typed
    tp of 10^12 is answered at once)."""
    low = max(floor, 1)
    common = 0
    for number in numbers:
        common = gcd(common, number)
    if common == 0:  # no numbers, or all zero: every k divides them
        return cap if cap >= low else None
    best = None
    k = 1
    while k * k <= common:
        if common % k == 0:
            for divisor in (k, common // k):
                if low <= divisor <= cap and (best is None or divisor > best):
                    best = divisor
        k += 1
    return best


def smallest_multiple_at_least(value: int, step: int) -> int:
    """The least multiple of ``step`` that is ≥ ``value``."""
    return -(-value // step) * step


def dp_for_expert_grid(tp: int, dp: int, cp: int, grid: int) -> int:
    """The least data-parallel size d' ≥ d, a multiple of d, for which e·e_t divides t·d'·c."""
    return dp * (grid // gcd(tp * dp * cp, grid))


def try_flags(*flags: str) -> str:
    """``try `--dp 8``` (alternatives joined by ``or``): the phrase every refusal ends with."""
    return "try " + " or ".join(f"`{flag}`" for flag in flags)
