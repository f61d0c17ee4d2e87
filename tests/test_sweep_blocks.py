"""The sweep in blocks of SWEEP_BLOCK configurations gives the doubles one numpy call over all gives."""
import numpy as np

from symbolic.search import plan as P
from symbolic.search.plan import Group, sweep


def test_blocked_sweep_equals_one_call_over_every_configuration():
    rng = np.random.default_rng(7)
    n = 2 * P.SWEEP_BLOCK + 123  # two whole blocks and a ragged one
    heads = rng.choice([16, 32, 96], n)
    values = {"h": heads * 128, "a": heads, "L": rng.choice([24, 48, 96], n), "V": rng.choice([50257, 51200], n),
              "s": rng.choice([1024, 2048], n), "b": rng.choice([1, 2, 4], n), "t": rng.choice([1, 2, 8], n),
              "p": rng.choice([1, 2, 8], n), "d": rng.choice([1, 8, 64], n), "v": 1, "f": 0}
    micro_batches = values["d"] * 8
    for group in (Group(sp=True, recompute="selective", zero=1, schedule="1f1b"), Group(recompute="full", zero=3)):
        blocked = sweep(group, values, micro_batches)
        whole = P._sweep_block(group, values, micro_batches)
        assert set(blocked) == set(whole)
        for name in whole:
            assert blocked[name].shape == (n,)
            assert np.array_equal(blocked[name], np.broadcast_to(whole[name], (n,))), name


def test_in_flight_without_interleaving_is_the_rule_at_every_shape():
    """in_flight_array's 1F1B-only path (no v > 1 in the arrays) against the layout's rule, with scalar
    and array arguments mixed as the sweep passes them."""
    from symbolic.layout.layout import in_flight
    from symbolic.search.plan import in_flight_array

    grid = [(pp, m) for pp in (1, 2, 3, 4, 8, 35) for m in range(1, 80)]
    pp, m = (np.array(column) for column in zip(*grid))
    for stage in ("first", "last"):
        expected = [in_flight(p_, 1, m_, stage) for p_, m_ in grid]
        for v in (1, np.ones_like(pp)):
            got = in_flight_array(pp, v, m, stage)
            assert got.dtype == np.int64 and got.tolist() == expected
        assert in_flight_array(8, np.ones(5, dtype=int), 3, stage).tolist() == [in_flight(8, 1, 3, stage)] * 5
        assert in_flight_array(np.array([1, 8]), 1, 64, stage).tolist() == [1, in_flight(8, 1, 64, stage)]


def test_blocked_sweep_keeps_length_one_arrays_broadcast():
    n = P.SWEEP_BLOCK + 5
    values = {"h": np.full(n, 4096), "a": np.array([32]), "L": 32, "V": np.array([51200]), "s": 2048,
              "b": np.arange(n) % 4 + 1, "t": 2, "p": np.array([4]), "d": 8, "v": 1, "f": 0}
    group = Group(sp=True, recompute="selective", zero=1, schedule="1f1b")
    blocked = sweep(group, values, np.array([64]))
    whole = P._sweep_block(group, values, np.array([64]))
    for name in whole:
        assert np.array_equal(blocked[name], np.broadcast_to(whole[name], (n,))), name


def test_blocked_kernel_call_equals_the_expression_form_bit_for_bit():
    """The kernel's case decided once for a call of several blocks: the expression form's doubles over
    every configuration, the papers' totals alone into the caller's table, a column given as a list,
    the parameter count by hand."""
    rng = np.random.default_rng(11)
    n = 2 * P.SWEEP_BLOCK + 77
    heads = rng.choice([16, 32, 96], n)
    values = {"h": heads * 128, "a": heads, "L": rng.choice([24, 48, 96], n).tolist(),
              "V": rng.choice([50257, 51200], n), "s": 2048, "b": rng.choice([1, 2, 4], n),
              "t": rng.choice([1, 3, 8], n), "p": rng.choice([1, 2, 5], n), "d": rng.choice([1, 3, 64], n),
              "v": 1, "f": 0}
    micro_batches = values["d"] * 8
    group = Group(sp=True, recompute="selective", zero=1, schedule="1f1b")
    for hand in (None, 7.5e9):
        P._KERNELS.clear()  # the expression form first: no kernel compiled for the group
        whole = P._sweep_block(group, values, micro_batches, hand)
        assert not P._KERNELS
        blocked = sweep(group, values, micro_batches, hand, kernel=True)
        assert P._KERNELS  # the kernel evaluated it
        for name in whole:
            expected = np.broadcast_to(whole[name], (n,))
            assert np.array_equal(blocked[name].view(np.uint64), np.ascontiguousarray(expected).view(np.uint64)), name
        table = np.zeros(n)
        papers = sweep(group, values, micro_batches, hand, out={"paper_total_bytes": table}, papers_only=True,
                       kernel=True)
        assert papers["paper_total_bytes"] is table
        assert np.array_equal(table.view(np.uint64), whole["paper_total_bytes"].view(np.uint64))
