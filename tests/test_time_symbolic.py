"""The step time's symbolic backend (``ledgers.arrays`` on sympy, ``render.page_time``): ``price`` run once on
symbols and evaluated at a layout is the bill's float ``price`` at that layout, for every part of the
breakdown — the calculator page's step time is the bill's code, not a copy (issue 23 item 5)."""
from __future__ import annotations

import math
import random

import pytest

from symbolic.bill import timing
from symbolic.bill.derive import inventories
from symbolic.core.numeric import exact
from symbolic.layout.layout import Layout
from symbolic.ledgers import arrays, kernels
from symbolic.ledgers import params as params_ledger
from symbolic.ledgers.hardware import builtin
from symbolic.models.builtin import preset
from symbolic.render import page_time

CASES = [
    ("llama-3-8b", Layout(tp=2, pp=2, sp=True, zero=1, dp=2, global_batch=16), "b200"),
    ("llama-3-8b", Layout(tp=8, sp=True, recompute="selective"), "h100-sxm"),
    ("gpt-7b", Layout(zero=3, dp=8, recompute="full", micro_batch=2), "a100-80gb"),
    ("gpt-175b", Layout(tp=8, pp=8, interleave=2, sp=True, global_batch=64), "h100-sxm"),
    ("mixtral-8x7b", Layout(tp=2, dp=4, ep=4, sp=True, zero=1), "b200"),
    ("llama-3-8b", Layout(lora=16, base_dtype="nf4", recompute="full", dp=2), "a100-80gb"),
    ("qwen3-8b", Layout(pp=2, dp=2, dtype="fp8", optimizer="fp8-adam"), "h100-sxm"),
]


def _values(model, layout):
    count = int(exact(params_ledger.count(inventories(model)[0]), layout.values(model)))
    return count, timing.letters(model, layout, params_count=count)


def _close(x, y, rel=1e-12):
    return x == y or abs(x - y) <= rel * max(abs(x), abs(y))


@pytest.mark.parametrize("name,layout,gpu", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_the_symbolic_price_at_a_layout_is_the_bills_float(name, layout, gpu):
    model, hw = preset(name), builtin()[gpu]
    count, values = _values(model, layout)
    bill = timing.step_time(model, layout, hw, params_count=count)
    derivation = timing.derivation_for(model, layout)
    expressions = derivation.expressions()
    # the n_i as symbols (the page's form), each then the exact value of its expression at the layout
    numbers = page_time.shell_numbers(expressions)
    priced = page_time.priced(derivation, numbers, hw, gemm_dtype=layout.gemm_dtype)
    at = {**values, **{f"n{i}": float(exact(x, values)) for i, x in enumerate(expressions)}}
    got = dict(zip(page_time.OUTPUTS, (page_time.evaluate(x, at) for x in priced.outputs)))
    want = {"step": float(bill.step_seconds), **{k: float(v) for k, v in bill.breakdown.items()},
            "model_flops": float(bill.model_flops), "hardware_flops": float(bill.hardware_flops)}
    assert set(want) == set(got)
    for key in want:
        assert _close(got[key], want[key]), (key, got[key], want[key])
    assert got["step"] > 0 and all(math.isfinite(v) for v in got.values())
    assert priced.factors["kernels"] == bill.factors["kernels"]


def test_the_symbolic_nearest_is_table_nearest_with_its_tie_rule():
    """``Table.nearest`` on symbols is ``nearest_efficiency(id, …)``, which evaluates by the table's own
    rule — ties (equally near rows) to the first in file order."""
    from sympy import Integer, Symbol

    tables = kernels.for_hardware("B200-180GB", builtin()["b200"].peak_bf16_flops)
    table = tables.gemm["forward"]
    m, n, k = (Symbol(x, positive=True) for x in "mnk")
    call = table.nearest(m, n, k)
    assert call.func.__name__ == "nearest_efficiency" and kernels.REGISTERED[int(call.args[0])] is table
    rng = random.Random(23)
    shapes = [tuple(rng.choice([1, 7, 512, 2048, 4096, 5120, 8192, 14336, 28672, 65536]) for _ in range(3))
              for _ in range(40)]
    for shape in shapes:
        value = call.xreplace(dict(zip((m, n, k), map(Integer, shape))))
        assert float(value) == table.nearest(*shape), shape
    # a tie: (2048, 2048, 2048) is midway in log space between the two rows; the first row wins, whichever
    # way the last place of the logarithms falls, and so does the symbolic call
    tied = kernels.Table(((4096, 4096, 4096), (1024, 1024, 1024)), (0.25, 0.75))
    assert tied.nearest(2048, 2048, 2048) == 0.25
    assert tied.nearest(*(Integer(2048),) * 2, m).xreplace({m: Integer(2048)}) == 0.25


def test_the_numeric_paths_are_unchanged_by_the_symbolic_backend():
    """numpy for arrays and Scalar for numbers, as before; ``equal`` is ``==`` on both."""
    import numpy

    assert arrays.equal(3.0, 3) is True and isinstance(arrays.where(True, 1.0, 2.0), arrays.Scalar)
    assert (arrays.equal(numpy.array([1.0, 2.0]), 2) == numpy.array([False, True])).all()
    assert arrays.shape(arrays.Scalar(1.0)) == () and arrays.shape(numpy.zeros((2, 3))) == (2, 3)
    from sympy import Symbol

    x = Symbol("x", positive=True)
    assert arrays.equal(x, 2).subs(x, 2) is not False and arrays.where(x > 1, x, 0.0).subs(x, 3) == 3
    assert arrays.maximum(x, 1.0).subs(x, 0.5) == 1.0 and arrays.ceil(x / 2).subs(x, 3) == 2


def test_the_page_prices_every_hardware_file():
    """``page_time.PAGE_GPUS`` is every shipped hardware file (``bill --gpu`` takes each; so does the page)."""
    from symbolic.ledgers.hardware import names

    assert sorted(page_time.PAGE_GPUS) == names()
    classes = {page_time.pricing_class(builtin()[gpu]) for gpu in page_time.PAGE_GPUS}
    assert len(classes) == 1   # every GPU shares the functions: its figures are page data


HARDWARE_CASES = [CASES[0], CASES[2], CASES[3], CASES[6],
                  ("llama-3-8b", Layout(tp=8, dp=16, sp=True, zero=1), "a100-80gb")]


_CLASS_PRICES: dict = {}  # (the class's first GPU, model, layout) -> its symbolic price (the tests below)


@pytest.mark.parametrize("gpu", page_time.PAGE_GPUS)
def test_one_class_function_is_each_gpus_price(gpu):
    """``price`` on the symbolic hardware of the first GPU of ``gpu``'s pricing class, its figures then
    ``gpu``'s (``hardware_values``), is the bill's float price on ``gpu``: the page's functions are shared
    by a class (A100-40GB with the A100-80GB, H800 with the H100, …) without changing a number."""
    from symbolic.ledgers.time import price

    from symbolic.core.dims import SYMBOLS

    hw = builtin()[gpu]
    first = next(builtin()[g] for g in page_time.PAGE_GPUS
                 if page_time.pricing_class(builtin()[g]) == page_time.pricing_class(hw))
    shw, stables = page_time.symbolic_hardware(first)
    figures = {page_time.hardware_symbol(k).name: v for k, v in page_time.hardware_values(hw).items()}
    for name, layout, _ in HARDWARE_CASES:
        model = preset(name)
        count, values = _values(model, layout)
        bill = timing.step_time(model, layout, hw, params_count=count)
        derivation = timing.derivation_for(model, layout)
        expressions = derivation.expressions()
        # the class's symbolic price of this case, the same for every GPU of the class: priced once
        key = (first.name, name, layout)
        if key not in _CLASS_PRICES:
            letters = {k: SYMBOLS[k] for k in page_time.PRICE_LETTERS}
            _CLASS_PRICES[key] = price(derivation, page_time.shell_numbers(expressions), letters, shw,
                                       gemm_dtype=layout.gemm_dtype, kernel_tables=stables)
        step = _CLASS_PRICES[key]
        at = {**values, **figures, **{f"n{i}": float(exact(x, values)) for i, x in enumerate(expressions)}}
        got = page_time.evaluate(step.step_seconds, at)
        assert _close(got, float(bill.step_seconds), 1e-12), (gpu, name, got, float(bill.step_seconds))
        for key, value in bill.breakdown.items():
            assert _close(page_time.evaluate(step.breakdown[key], at), float(value), 1e-12), (gpu, name, key)
