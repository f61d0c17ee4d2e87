"""The sweep's kernel compiled into one C loop (search.native) gives the numpy kernel's doubles, bit for
bit, on the sweep's groups and shapes and on the calls real plans make; outside its cases (no compiler,
d < 1, a list for a column, a dtype it does not read) the numpy kernel evaluates the call."""
import os
import tempfile

import numpy as np
import pytest

from symbolic.layout.layout import Layout
from symbolic.models.config import ModelConfig
from symbolic.search import native
from symbolic.search import plan as P
from symbolic.search.plan import Group, sweep

from _sweeps import GROUPS, sweep_values as _values

if native.compiler() is None and os.environ.get("CI") != "true":  # under CI a C compiler is installed: no skip
    pytest.skip("no C compiler here (cc): the sweep runs its numpy kernel", allow_module_level=True)


def _bits(x):
    return np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)


def _numpy_kernel(group, values, micro_batches, hand=None, papers_only=False):
    """The block by the numpy kernel alone: no loop compiled in the process while it runs."""
    saved = dict(native._BUILT)
    native._BUILT.clear()
    try:
        return P._sweep_block(group, values, micro_batches, hand, papers_only=papers_only, build=True, loop=False)
    finally:
        native._BUILT.clear()
        native._BUILT.update(saved)


def _loop(group, values, micro_batches, hand=None, papers_only=False):
    """The block by the compiled loop (asserted to be the one that ran)."""
    formulas = P.group_formulas(group)
    arrays = frozenset(k for k, x in values.items() if np.ndim(x)) | {"m", "m_last", "_comm"} | (
        {"_mb"} if np.ndim(micro_batches) else set())
    kernel = P._sweep_kernel(formulas, arrays, hand is not None, papers_only)
    n = P._plain_length(values, micro_batches)
    signature = native.signature_of(kernel, values, micro_batches, n, hand)
    assert signature is not None and native.native_kernel(kernel, signature, P._COMM_SIZES) is not None
    return P._sweep_block(group, values, micro_batches, hand, papers_only=papers_only, build=True, loop=True)


def _assert_same(got, expected, label):
    assert set(got) == set(expected)
    for name in expected:
        assert np.shape(got[name]) == np.shape(expected[name]), (label, name)
        assert np.array_equal(_bits(got[name]), _bits(expected[name])), (label, name)


@pytest.mark.parametrize("odd,floats", [(False, False), (True, False), (True, True)])
def test_loop_equals_the_numpy_kernel_bit_for_bit(odd, floats):
    rng = np.random.default_rng(5)
    values, micro_batches = _values(rng, 1500 + 17, odd, floats)
    for group in GROUPS if not floats else GROUPS[::3]:  # float64 columns: a third of them (a compile each)
        for papers_only in (False, True):
            _assert_same(_loop(group, values, micro_batches, papers_only=papers_only),
                         _numpy_kernel(group, values, micro_batches, papers_only=papers_only), (group, papers_only))


def _plan_calls(monkeypatch, model, gpus, **options):
    """The (group, values, micro-batches, count by hand) of each sweep a real plan makes."""
    calls = []
    real = P.sweep

    def record(group, values, micro_batches, params_hand=None, **kwargs):
        calls.append((group, dict(values), micro_batches, params_hand))
        return real(group, values, micro_batches, params_hand, **kwargs)

    monkeypatch.setattr(P, "sweep", record)
    P.plan(model, gpus, 80 * 10**9, **options)
    monkeypatch.setattr(P, "sweep", real)
    return calls


@pytest.mark.parametrize("case", ["dense", "context", "uneven", "lora", "offload", "hand"])
def test_loop_on_the_calls_real_plans_make(monkeypatch, case):
    """A plan's calls: the model's letters scalars, the layouts' arrays; dense, context-parallel,
    uneven stages (ceiling), LoRA, optimizer offload, the parameter count by hand."""
    gpt = ModelConfig("gpt-22b-like", 48, 6144, 48, 51200, 2048)
    model, gpus, options = {
        "dense": (gpt, 32, dict(global_batch=256)),
        "context": (ModelConfig("long", 32, 4096, 32, 32000, 32768), 32, dict(global_batch=64)),
        "uneven": (gpt, 32, dict(global_batch=256, first_stage_layers=5)),
        "lora": (gpt, 8, dict(global_batch=64, levers=dict(lora=16))),
        "offload": (gpt, 8, dict(global_batch=64, levers=dict(offload="optimizer"))),
        "hand": (gpt, 32, dict(global_batch=256, params_hand=22_000_000_000)),
    }[case]
    if "levers" in options:
        Layout(**options["levers"])  # the plan's own check of the levers
    calls = _plan_calls(monkeypatch, model, gpus, **options)
    assert calls
    compared = 0
    for group, values, micro_batches, hand in calls[::max(1, len(calls) // 8)]:  # eight groups of the plan's
        # The kernel's case of the same layouts: m derived from mb, d, p (not given), not interleaved, no expert grid.
        keep = np.asarray(values["v"]) == 1
        values = {k: (x[keep] if np.ndim(x) else x) for k, x in values.items() if k not in ("m", "m_last", "e_t")}
        values["v"], micro_batches = 1, micro_batches[keep]
        if np.all(np.asarray(values.get("e", 1)) == 1):
            values["e"] = 1
        n = P._plain_length(values, micro_batches)
        if not n or not P._kernel_ready(values, micro_batches):
            continue
        _assert_same(_loop(group, values, micro_batches, hand), _numpy_kernel(group, values, micro_batches, hand),
                     (case, group))
        compared += 1
    assert compared


def test_a_call_of_many_blocks_runs_in_one_loop_into_the_callers_table():
    rng = np.random.default_rng(9)
    n = 3 * P.PAPERS_BLOCK + 11
    values, micro_batches = _values(rng, n)
    group = Group(sp=True, recompute="selective", zero=1, schedule="1f1b")
    expected = _numpy_kernel(group, values, micro_batches)
    table = np.zeros(n)
    got = sweep(group, values, micro_batches, out={"paper_total_bytes": table}, papers_only=True, kernel=True)
    assert got["paper_total_bytes"] is table
    assert np.array_equal(_bits(table), _bits(expected["paper_total_bytes"]))
    whole = sweep(group, values, micro_batches, kernel=True)
    _assert_same(whole, expected, "whole call")


def test_outside_the_loops_cases_the_numpy_kernel_answers():
    """d = 0 or a negative micro-batch count stop the loop (m's rule is proven for d ≥ 1, mb ≥ 0); a column
    given as a list or as int32 is numpy's to convert: the numpy kernel's doubles each time."""
    rng = np.random.default_rng(2)
    n = 2 * P.PAPERS_BLOCK + 5
    group = Group(sp=False, recompute="full", zero=1, schedule="1f1b")
    values, micro_batches = _values(rng, n)
    sweep(group, values, micro_batches, kernel=True)  # the loop compiled for this signature
    for label, change in (("d = 0", lambda v, mb: (dict(v, d=np.where(np.arange(n) == 7, 0, v["d"])), mb)),
                          ("mb < 0", lambda v, mb: (v, np.where(np.arange(n) == n - 1, -8, mb))),
                          ("a list", lambda v, mb: (dict(v, L=v["L"].tolist()), mb)),
                          ("int32", lambda v, mb: (dict(v, h=v["h"].astype(np.int32)), mb))):
        changed, mb = change(values, micro_batches)
        with np.errstate(divide="ignore"):
            got = sweep(group, changed, mb, kernel=True)
            expected = _numpy_kernel(group, changed, mb)
        _assert_same(got, {k: np.broadcast_to(x, (n,)) for k, x in expected.items()}, label)


def test_without_a_compiler_or_when_turned_off_there_is_no_loop(monkeypatch):
    rng = np.random.default_rng(4)
    values, micro_batches = _values(rng, 300)
    group = Group(recompute="selective", zero=3, schedule="1f1b")
    expected = _numpy_kernel(group, values, micro_batches)
    for variable, value in (("CC", "/nonexistent/cc"), ("CC", '"cc'), ("SYMBOLIC_NATIVE", "0")):
        monkeypatch.setenv(variable, value)
        saved = dict(native._BUILT)
        native._BUILT.clear()
        try:
            assert not native.enabled()
            got = P._sweep_block(group, values, micro_batches, build=True, loop=True)
            assert not any(built for _, built in native._BUILT.values())
        finally:
            native._BUILT.clear()
            native._BUILT.update(saved)
        _assert_same(got, expected, variable)
        monkeypatch.delenv(variable)


def test_the_c_text_holds_numbers_and_indices_only(monkeypatch, tmp_path):
    """Constants as exact hexadecimal floats, no formula's text; compiled in a private folder that is gone
    once the library is loaded."""
    rng = np.random.default_rng(1)
    values, micro_batches = _values(rng, 64)
    group = Group(sp=True, recompute="none", zero=1, schedule="1f1b")
    kernel = P._sweep_kernel(P.group_formulas(group), frozenset(values) - {"v", "f"} | {"m", "m_last", "_comm", "_mb"},
                             False, True)
    signature = native.signature_of(kernel, values, micro_batches, 64, None)
    text = native._c_text(kernel.graph, signature, [])
    assert "0x1.8p+3" in text or "0x1.8000000000000p+3" in text  # 12.0, exactly
    assert "cse_" not in text and "Psi" not in text
    assert native._c_name("a-b") == "a_u2d_b" and native._c_name("L_1") == "L_1"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert native._compile(text) is not None
    assert list(tmp_path.iterdir()) == []


def test_loop_with_pipeline_letters_as_python_ints():
    """p, d or the micro-batch count given as Python ints beside arrays (m's rule reads them as int64)."""
    rng = np.random.default_rng(8)
    values, micro_batches = _values(rng, 700)
    for label, changed, mb in (("p an int", dict(values, p=4), micro_batches),
                               ("d and mb ints", dict(values, d=8), 8 * 7),
                               ("p, d, mb ints, v an array",
                                dict(values, p=1, d=3, v=np.ones(700, dtype=np.int64)), 21)):
        for group in GROUPS[::5]:
            _assert_same(_loop(group, changed, mb), _numpy_kernel(group, changed, mb), (label, group))


def test_a_table_the_loop_cannot_write_is_written_by_numpy():
    """A strided view, a float32 table or one that overlaps an input: the numpy kernel writes it as it is."""
    rng = np.random.default_rng(6)
    n = 2 * P.PAPERS_BLOCK + 3
    values, micro_batches = _values(rng, n, floats=True)
    group = Group(sp=True, recompute="selective", zero=1, schedule="1f1b")
    expected = _numpy_kernel(group, values, micro_batches, papers_only=True)["paper_total_bytes"]
    strided = np.zeros(2 * n)[::2]
    sweep(group, values, micro_batches, out={"paper_total_bytes": strided}, papers_only=True, kernel=True)
    assert np.array_equal(_bits(strided), _bits(expected))
    overlapping = values["h"].copy()
    changed = dict(values, h=overlapping)
    sweep(group, changed, micro_batches, out={"paper_total_bytes": overlapping}, papers_only=True, kernel=True)
    assert np.array_equal(_bits(overlapping), _bits(expected))


def test_a_loop_whose_doubles_differ_is_refused(monkeypatch):
    """A compiler that reassociated or fused would be caught on the loop's first call: its doubles against
    the numpy kernel's on a sample; the call, and every later one, goes to numpy."""
    rng = np.random.default_rng(12)
    n = 2 * P.PAPERS_BLOCK + 9
    values, micro_batches = _values(rng, n)
    group = Group(recompute="full", zero=0, schedule="1f1b")
    expected = _numpy_kernel(group, values, micro_batches, papers_only=True)["paper_total_bytes"]
    saved = dict(native._BUILT)
    native._BUILT.clear()
    real = native.run

    def off_by_one_ulp(kernel, *args):
        results = real(kernel, *args)
        return None if results is None else [np.nextafter(x, np.inf) for x in results]

    monkeypatch.setattr(native, "run", off_by_one_ulp)
    try:
        got = sweep(group, values, micro_batches, papers_only=True, kernel=True)["paper_total_bytes"]
        assert np.array_equal(_bits(got), _bits(expected))
        assert list(native._BUILT.values()) and all(built is None for _, built in native._BUILT.values())
    finally:
        native._BUILT.clear()
        native._BUILT.update(saved)


def test_a_column_off_its_alignment_is_read_by_numpy():
    """A float64 column that starts mid-word (a view into bytes): not the loop's to read."""
    rng = np.random.default_rng(13)
    n = 1000
    values, micro_batches = _values(rng, n, floats=True)
    raw = np.zeros(n * 8 + 1, dtype=np.uint8)
    shifted = raw[1:].view(np.float64)
    shifted[:] = values["h"]
    assert not shifted.flags.aligned
    changed = dict(values, h=shifted)
    group = Group(sp=True, recompute="selective", zero=1, schedule="1f1b")
    kernel = P._sweep_kernel(P.group_formulas(group), frozenset(values) - {"v", "f"} | {"m", "m_last", "_comm", "_mb"},
                             False, True)
    assert native.signature_of(kernel, changed, micro_batches, n, None) is None
    _assert_same(P._sweep_block(group, changed, micro_batches, papers_only=True, build=True, loop=True),
                 _numpy_kernel(group, values, micro_batches, papers_only=True), "unaligned")


def test_signed_zeros_nan_payloads_and_a_lazy_mapping_as_numpy_gives_them():
    """Of +0 and -0 the maximum numpy's loops return (read off numpy, not assumed); a NaN result sends
    the call to numpy (a NaN's payload is the compiler's choice of operand); a mapping that builds its
    arrays on each access (an npz file) is read once, the arrays checked the arrays the loop reads."""
    import io
    from collections.abc import Mapping

    from symbolic.search.kernel import program

    k = program((), ("Max(a, b)", "Max(a, 0) + b*0", "-a"), frozenset({"a", "b"}))
    zeros = {"a": np.array([0.0, -0.0, 0.0, -0.0] * 5), "b": np.array([-0.0, 0.0, 0.0, -0.0] * 5)}
    compiled = native.native_kernel(k, native.signature_of(k, zeros, 1, 20, None), P._COMM_SIZES)
    assert compiled is not None
    for got, expected in zip(native.run(compiled, zeros, 1, 20, [None] * 3, None), k(dict(zeros), [None] * 3, 20)):
        assert np.array_equal(_bits(got), _bits(expected))

    rng = np.random.default_rng(14)
    n = 2 * P.PAPERS_BLOCK + 1
    values, micro_batches = _values(rng, n, floats=True)
    group = Group(sp=True, recompute="full", zero=1, schedule="1f1b")
    sweep(group, values, micro_batches, kernel=True)  # compiled, checked on clean values
    quiet_nan = np.frombuffer(np.uint64(0x7FF8000000000001).tobytes(), np.float64)[0]
    nans = dict(values, h=np.where(np.arange(n) % 2 == 0, np.nan, values["h"]),
                s=np.where(np.arange(n) % 3 == 0, -quiet_nan, values["s"]))
    with np.errstate(all="ignore"):
        got = sweep(group, nans, micro_batches, kernel=True)
        expected = _numpy_kernel(group, nans, micro_batches)
    _assert_same(got, expected, "NaN")

    columns = io.BytesIO()
    np.savez(columns, **{k: x for k, x in values.items() if np.ndim(x)})
    columns.seek(0)
    stored = np.load(columns)

    class Lazy(Mapping):  # each access a fresh array, as an npz file's
        def __getitem__(self, key):
            return values[key] if key in ("v", "f") else stored[key]

        def __iter__(self):
            return iter(values)

        def __len__(self):
            return len(values)

    _assert_same(sweep(group, Lazy(), micro_batches, kernel=True), _numpy_kernel(group, values, micro_batches),
                 "lazy mapping")


def test_a_fast_math_compiler_or_a_column_the_loop_does_not_read_is_refused(monkeypatch):
    rng = np.random.default_rng(15)
    values, micro_batches = _values(rng, 200)
    group = Group(recompute="selective", zero=1, schedule="1f1b")
    expected = _numpy_kernel(group, values, micro_batches)
    saved = dict(native._BUILT)
    native._BUILT.clear()
    monkeypatch.setenv("CC", "cc -ffast-math")
    try:  # the C text's own #error: reassociation or excess precision would change the doubles
        _assert_same(P._sweep_block(group, values, micro_batches, build=True, loop=True), expected, "fast-math")
        assert list(native._BUILT.values()) and all(built is None for _, built in native._BUILT.values())
    finally:
        native._BUILT.clear()
        native._BUILT.update(saved)
    monkeypatch.delenv("CC")
    # Psi given as a column beside a hand count: the program reads a column the signature leaves out
    psi = dict(values, Psi=np.full(200, 5.0))
    with_hand = P._sweep_block(group, psi, micro_batches, 7e9, build=True, loop=True)
    _assert_same(with_hand, _numpy_kernel(group, psi, micro_batches, 7e9), "Psi column")


def test_a_whole_call_with_the_models_letters_scalar(monkeypatch):
    """A call of several blocks whose parameter count is one scalar (the model's letters given once): the
    loop's arrays and the scalar broadcast, as the numpy kernel's blocks give them."""
    rng = np.random.default_rng(16)
    n = 2 * P.SWEEP_BLOCK + 5
    values = {"h": 12288, "a": 96, "L": 96, "V": 51200, "s": 2048, "b": rng.choice([1, 2, 4], n),
              "t": rng.choice([1, 2, 8], n), "p": rng.choice([1, 4, 8], n), "d": rng.choice([1, 8, 32], n),
              "v": 1, "f": 0}
    micro_batches = values["d"] * 64
    group = Group(sp=True, recompute="selective", zero=1, schedule="1f1b")
    looped = sweep(group, values, micro_batches, kernel=True)
    assert any(built is not None for _, built in native._BUILT.values())
    saved = dict(native._BUILT)
    native._BUILT.clear()
    monkeypatch.setenv("SYMBOLIC_NATIVE", "0")
    try:
        expected = sweep(group, values, micro_batches, kernel=True)
    finally:
        native._BUILT.clear()
        native._BUILT.update(saved)
    _assert_same(looped, expected, "scalar model")
    assert looped["params"].shape == (n,) and len(set(looped["params"].tolist())) == 1
