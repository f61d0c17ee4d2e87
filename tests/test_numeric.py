from decimal import Decimal

import pytest
from sympy import Rational

from symbolic.core.dims import b, s
from symbolic.core.numeric import EvaluationError, exact, exact_int, fmt, round_half_up


def test_units_are_decimal_and_binary():
    assert fmt(52_076_478_464, "GB") == "52.08 GB"
    assert fmt(2**30, "GiB") == "1.00 GiB"
    assert fmt(83_886_080, "MiB", 0) == "80 MiB"


def test_round_half_up_is_exact():
    assert round_half_up(Rational(5, 2), 0) == Decimal(3)
    assert round_half_up(Rational(-5, 2), 0) == Decimal(-3)
    assert round_half_up(Rational(12345, 1000), 2) == Decimal("12.35")


def test_exact_needs_every_symbol():
    assert exact_int(s * b, {"s": 3, "b": 4}) == 12
    with pytest.raises(EvaluationError, match="no value given for b"):
        exact(s * b, {"s": 3})
