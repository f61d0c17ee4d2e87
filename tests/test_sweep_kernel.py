"""The sweep's kernel (search.kernel: each operation once, into reused buffers) gives the doubles the
formulas' expression form gives, bit for bit, on the sweep's groups and shapes."""
import numpy as np
import pytest

from symbolic.core.expressions import FormulaError
from symbolic.search import plan as P
from symbolic.search.kernel import program
from symbolic.search.plan import Group

from _sweeps import GROUPS, sweep_values as _values


def _expression_form(group, values, micro_batches, params_hand=None):
    """The sweep of one block by the expression form alone (no kernel compiled, none built)."""
    saved = dict(P._KERNELS)
    P._KERNELS.clear()
    try:
        return P._sweep_block(group, values, micro_batches, params_hand)
    finally:
        P._KERNELS.update(saved)


def _bits(x):
    return np.asarray(x, dtype=np.float64).view(np.uint64)


@pytest.mark.parametrize("odd", [False, True])
def test_kernel_equals_the_expression_form_bit_for_bit(odd):
    rng = np.random.default_rng(11)
    values, micro_batches = _values(rng, 2048 + 77, odd)
    for group in GROUPS:
        kernel = P._sweep_block(group, values, micro_batches, build=True)
        expected = _expression_form(group, values, micro_batches)
        assert set(kernel) == set(expected)
        for name in expected:
            assert np.shape(kernel[name]) == np.shape(expected[name]), name
            assert np.array_equal(_bits(kernel[name]), _bits(expected[name])), (group, name)


def test_kernel_with_model_letters_scalar_and_a_hand_count():
    """A plan's call: the model's letters scalars, the layout's arrays, the parameter count by hand."""
    rng = np.random.default_rng(3)
    n = 4096
    values = {"h": 12288, "a": 96, "L": 96, "V": 51200, "s": 2048, "b": rng.choice([1, 2, 4], n),
              "t": rng.choice([1, 2, 8], n), "p": rng.choice([1, 4, 8], n), "d": rng.choice([1, 8, 32], n),
              "v": np.ones(n, dtype=np.int64), "f": 0}
    micro_batches = values["d"] * 64
    for group in GROUPS[:6]:
        for hand in (None, 175_000_000_000):
            kernel = P._sweep_block(group, values, micro_batches, hand, build=True)
            expected = _expression_form(group, values, micro_batches, hand)
            for name in expected:
                assert np.shape(kernel[name]) == np.shape(expected[name]), name
                assert np.array_equal(_bits(kernel[name]), _bits(expected[name])), (group, hand, name)


def test_kernel_writes_into_given_arrays_and_returns_no_input():
    x = np.arange(1.0, 6.0)
    given = np.empty(5)
    k = program((), ("x", "x*2", "x*2", ("in", "x")), frozenset({"x"}))
    out = k({"x": x}, [given, None, None, None], 5)
    assert out[0] is given and np.array_equal(given, x)   # an input copied, never returned itself
    assert out[1] is not out[2] and np.array_equal(out[2], 2 * x)   # one operation, two outputs of their own
    assert out[3] is not x and np.array_equal(out[3], x)


def test_kernel_reads_only_arithmetic():
    with pytest.raises(FormulaError):
        program((), ("__import__('os')",), frozenset())
    with pytest.raises(FormulaError):
        program((("cse_0", "x.real"),), ("cse_0",), frozenset())


def test_kernel_chunks_in_flight_where_a_pipeline_gets_no_micro_batch():
    """micro-batches per pipeline ⌊mb/d⌋ of 0 beside p = 1 (the chunks in flight 1 there, 0 elsewhere),
    and micro-batch counts not a multiple of d: the kernel's doubles are the expression form's."""
    rng = np.random.default_rng(5)
    values, _ = _values(rng, 2048 + 5, odd=True)
    micro_batches = rng.choice([1, 2, 5, 24, 97], 2048 + 5)
    assert np.any(micro_batches < values["d"]) and np.any(values["p"] == 1)
    for group in GROUPS[:4]:
        kernel = P._sweep_block(group, values, micro_batches, build=True)
        expected = _expression_form(group, values, micro_batches)
        for name in expected:
            assert np.array_equal(_bits(kernel[name]), _bits(expected[name])), (group, name)


def test_a_call_below_the_threshold_compiles_no_kernel_and_one_above_does():
    rng = np.random.default_rng(2)
    group = Group(sp=True, recompute="full", zero=2, schedule="1f1b")
    small, small_mb = _values(rng, 3000)
    P._KERNELS.clear()
    P.sweep(group, small, small_mb)
    assert not P._KERNELS  # a plan's groups: the expression form, no compile
    big, big_mb = _values(rng, P.KERNEL_MIN)
    whole = P.sweep(group, big, big_mb)
    assert len(P._KERNELS) == 1
    cut = {k: (x[:3000] if isinstance(x, np.ndarray) else x) for k, x in big.items()}
    again = P.sweep(group, cut, big_mb[:3000])  # compiled now: used at any size
    for name in whole:
        assert np.array_equal(_bits(again[name]), _bits(whole[name][:3000])), name


def test_the_largest_keeps_its_operands_order():
    """Of +0 and -0, numpy's maximum returns one by position: Max(a, b) and Max(b, a) are two operations,
    each numpy's maximum of its operands in the text's order."""
    a = np.array([0.0, -0.0, 0.0, -0.0] * 4)
    b = np.array([-0.0, 0.0, 0.0, -0.0] * 4)
    k = program((), ("Max(a, b)", "Max(b, a)", "Max(a, a)"), frozenset({"a", "b"}))
    first, second, same = k({"a": a, "b": b}, [None] * 3, 16)
    assert np.array_equal(np.signbit(first), np.signbit(np.maximum(a, b)))
    assert np.array_equal(np.signbit(second), np.signbit(np.maximum(b, a)))
    assert np.array_equal(_bits(same), _bits(a))
