"""One layout priced in plain Python floats (a bill), arrays priced with numpy (a plan): the same numbers
bit for bit, a cached bill with neither numpy nor sympy imported, and the kernel tables' ties broken by
the file's order rather than by a logarithm's last place (symbolic.ledgers.arrays, ledgers.kernels)."""
from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from symbolic.bill import timing
from symbolic.bill.derive import inventories
from symbolic.core.numeric import exact
from symbolic.core.expressions import evaluate_formula
from symbolic.layout.layout import Layout
from symbolic.ledgers import hardware
from symbolic.ledgers import params as params_ledger
from symbolic.ledgers.arrays import Scalar, first, maximum, where
from symbolic.ledgers.kernels import Table
from symbolic.ledgers.time import price
from symbolic.models.builtin import preset

A100 = hardware.load("a100")
H100 = hardware.load("h100")


def test_a_cached_bill_imports_neither_numpy_nor_sympy(tmp_path):
    """Nor rich (a bill into a pipe is laid out by render/blocks.py) nor hashlib (core/digest.py): issue 24's
    cold bill."""
    env = dict(os.environ, SYMBOLIC_CACHE_DIR=str(tmp_path))
    probe = ("import sys, contextlib, io\nfrom symbolic.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    codes = [main(['bill', 'gpt-175b']), main(['bill', 'mixtral-8x7b', '--ep', '8', '--dp', '8', '--json'])]\n"
             "print(*codes, *(name in sys.modules for name in ('numpy', 'sympy', 'rich', 'hashlib')))")
    run = lambda: subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)  # noqa: E731
    assert run().stdout.split()[:4:3] == ["0", "True"]                             # first: derived with sympy
    assert run().stdout.split() == ["0", "0", "False", "False", "False", "False"]  # then: the cache and floats


def test_a_scalar_divides_by_zero_as_numpy_does():
    with np.errstate(divide="ignore", invalid="ignore"):
        for a, b in [(1.0, 0.0), (-2.0, 0.0), (0.0, 0.0), (3.0, -0.0), (5.0, 4.0)]:
            got, want = Scalar(a) / b, np.float64(a) / np.float64(b)
            assert isinstance(got, Scalar) and (math.isnan(got) and math.isnan(want) or got == want), (a, b)
            got, want = a / Scalar(b), np.float64(a) / np.float64(b)
            assert isinstance(got, Scalar) and (math.isnan(got) and math.isnan(want) or got == want), (a, b)
    x = Scalar(3.0)
    assert all(isinstance(v, Scalar) for v in (x + 1, 1 + x, x - 1, 1 - x, x * 2, 2 * x, x ** 2, -x))
    assert where(True, x / 0.0, 0.0) == math.inf and where(False, x / 0.0, 0.0) == 0.0
    assert isinstance(maximum(1, 2), Scalar) and first(x) is x and first(np.array([[7.0]])) == 7.0
    assert isinstance(where(np.array([True]), 1.0, 0.0), np.ndarray)  # an array: numpy's own


@pytest.mark.parametrize("model, layout, hw", [
    ("gpt-175b", Layout(micro_batch=1, tp=8, pp=8, dp=2, sp=True, recompute="selective", global_batch=128), A100),
    ("gpt-175b", Layout(micro_batch=2, tp=4, pp=1, dp=16, zero=3, global_batch=256), H100),
    ("llama-3-8b", Layout(micro_batch=1, tp=2, cp=2, dp=4, zero=1, flash_attention=True), H100),
    ("mixtral-8x7b", Layout(micro_batch=1, ep=8, dp=8, tp=1, pp=4, first_stage_layers=5), A100),
])
def test_one_layout_in_floats_is_the_array_path_bit_for_bit(model, layout, hw):
    """The bill's pricing (Python floats) against the plan's (numpy arrays of one layout): every printed
    figure equal, not approximately."""
    model = preset(model)
    text = timing.stored(model, layout)
    params = int(exact(params_ledger.count(inventories(model)[0]), layout.values(model)))
    values = timing.letters(model, layout, params_count=params)
    numbers = [float(evaluate_formula(formula, values)) for formula in text.formulas]
    kw = dict(gemm_dtype=layout.gemm_dtype, detail=True)
    one = price(text.shell(), numbers, values, hw, **kw)
    arrays = price(text.shell(), [np.array([x]) for x in numbers],
                   {k: np.array([v], dtype=float) if isinstance(v, (int, float)) else v for k, v in values.items()},
                   hw, **kw)
    assert isinstance(one.step_seconds, float) and not isinstance(one.step_seconds, np.ndarray)
    assert float(one.step_seconds) == float(arrays.step_seconds[0])
    assert {k: float(v) for k, v in one.breakdown.items()} == {k: float(v[0]) for k, v in arrays.breakdown.items()}
    for a, b in zip(one.compute_lines, arrays.compute_lines):
        assert float(a["seconds"]) == float(b["seconds"][0]) and float(first(a["efficiency"])) == float(first(b["efficiency"]))
    for a, b in zip(one.comm_lines, arrays.comm_lines):
        assert (float(a["seconds"]), float(first(a["exposed"])), first(a["link"])) == \
               (float(b["seconds"][0]), float(first(b["exposed"])), str(first(b["link"])))


def test_a_shape_midway_between_two_rows_takes_the_first_in_either_path():
    """(2048, 12288, 12288) is as near (4096, 8192, 14336) as (4096, 14336, 8192) in log space: the first
    row wins in Python and in numpy, whatever the last place of either's logarithm."""
    table = Table(((1024, 1024, 1024), (4096, 8192, 14336), (4096, 14336, 8192)), (0.1, 0.7, 0.9))
    assert float(table.nearest(2048, 12288, 12288)) == 0.7
    got = table.nearest(np.array([2048.0, 1000.0, 4000.0]), np.array([12288.0, 1000.0, 14000.0]),
                        np.array([12288.0, 1000.0, 8200.0]))
    assert got.tolist() == [0.7, 0.1, 0.9]
    assert [float(table.nearest(m, n, k)) for m, n, k in [(1000, 1000, 1000), (4000, 14000, 8200)]] == [0.1, 0.9]
