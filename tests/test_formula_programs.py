"""Formulas run as programs (``core.expressions.array_program``/``exact_program``): the plan's cached
formulas read by the guarded reader and interpreted step by step, never compiled — the same numbers, bit
for bit, as the compiled functions they replace, and the same refusals."""
from fractions import Fraction

import numpy as np
import pytest

from symbolic.core.expressions import (
    FormulaError, array_program, compile_array_formulas, compile_formulas, exact_program,
)


def _bill_texts():
    from symbolic.bill.derive import derived
    from symbolic.layout.layout import Layout
    from symbolic.models.builtin import PRESETS

    out = []
    for name, layout in (("gpt-175b", Layout(tp=8, pp=8, sp=True, recompute="selective", global_batch=64)),
                         ("mixtral-8x7b", Layout(tp=2, dp=4, ep=4, zero=3, micro_batch=3))):
        model = PRESETS[name]
        bill = derived(model, layout)
        out.append(([line.formula for line in bill.lines] + list(bill.formulas.values()),
                    dict(layout.values(model), Psi=7 * 10**9 + 1)))
    return out


def test_programs_give_the_compiled_functions_numbers_bit_for_bit():
    """Every formula of two real derivations: exact (ints and Fractions, the same types) and over float
    arrays (the same doubles, the same dtype), as compile_formulas and compile_array_formulas give them."""
    rng = np.random.default_rng(0)
    for texts, values in _bill_texts():
        got, want = exact_program(texts)(values), compile_formulas(texts)(values)
        assert got == want and [type(x) for x in got] == [type(x) for x in want]
        arrays = {k: v * rng.integers(1, 5, size=257).astype(np.float64) for k, v in values.items()}
        for x, y in zip(array_program(texts)(arrays), compile_array_formulas(texts)(arrays), strict=True):
            x, y = np.asarray(x), np.asarray(y)
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
            assert x.tobytes() == y.tobytes()


def test_common_subexpressions_are_computed_once_in_order():
    common = (("cse_0", "s*b"), ("cse_1", "cse_0 + h"), ("h", "2*h"))  # h read, then computed under its name
    texts = ["cse_1/3", "Max(cse_0, h, 7)", "ceiling(cse_1/4)", "-cse_0**2"]
    values = {"s": 2, "b": 3, "h": 5}
    assert exact_program(texts, common)(values) == (Fraction(11, 3), 10, 3, -36)
    floats = {k: np.array([float(v)]) for k, v in values.items()}
    assert [float(x[0]) for x in array_program(texts, common)(floats)] == [11 / 3, 10.0, 3.0, -36.0]
    assert array_program(texts, common).names == {"s", "b", "h"}


def test_programs_refuse_what_the_reader_refuses():
    for bad in ('__import__("os").system("true")', "s.real", "Max(s, key=1)", "lambda: 1", "x[0]"):
        with pytest.raises(FormulaError):
            array_program(["s", bad])
        with pytest.raises(FormulaError):
            exact_program(["s", bad])
    with pytest.raises(FormulaError, match="not a name"):
        array_program(["s"], (("not a name", "s"),))
    with pytest.raises(FormulaError, match="unknown name 'h'"):
        exact_program(["s*h"])({"s": 1})
    with pytest.raises(FormulaError, match="beyond"):
        exact_program(["s**100"])({"s": 2})
    deep = "+".join(["s"] * 400)  # a long sum: its steps in a flat list, no recursion when run
    assert exact_program([deep])({"s": 3}) == (1200,)


def test_the_plans_functions_give_the_same_doubles_run_and_compiled():
    """search.formulas._array_function: its first COMPILE_AFTER calls run the program (a fresh plan calls most
    functions once or twice: issue 45), later ones the compiled formulas (a process that plans again): the same
    doubles every time."""
    from symbolic.search.formulas import COMPILE_AFTER, _array_function

    texts, values = _bill_texts()[0]
    arrays = {k: np.full(33, float(v)) * np.arange(1, 34) for k, v in values.items()}
    _array_function.cache_clear()  # a fresh function: none of its calls made by an earlier test
    function = _array_function(tuple(texts), (), tuple(sorted(values)))
    results = []
    for call in range(COMPILE_AFTER + 2):
        results.append(function(arrays))
        assert function.compiled == (call >= COMPILE_AFTER), call
    first = results[0]
    for other in results[1:]:
        assert [np.asarray(x).tobytes() for x in first] == [np.asarray(x).tobytes() for x in other]
