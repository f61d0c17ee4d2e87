"""Scale (issue 14): the timeline linear in layers and micro-batches in flight, the snapshot
reader linear in events, divisors by factorisation — each checked by the growth of the time
for a 2× input (a ratio, never a wall-clock limit), and the fast paths held equal to their
definitions."""
import math
import pickle
import random
import time

import pytest

from symbolic.layout.layout import Layout
from symbolic.models.builtin import preset
from symbolic.models.hf import from_hf_dict
from symbolic.search.plan import divisors
from symbolic.step import timeline as T
from symbolic.step.optimizations import apply


def gpt(layers: int):
    return from_hf_dict({"model_type": "gpt2", "n_layer": layers, "n_embd": 256, "n_head": 8, "n_inner": None,
                         "n_positions": 512, "vocab_size": 1000}, f"gpt-L{layers}")


def best_of(fn, repeats: int = 3) -> float:
    """The fastest of ``repeats`` runs, the garbage collector off (its full passes over many young
    objects would make a linear algorithm look superlinear). The objects alive before are frozen
    (``gc.freeze``) while it runs: each run's ``gc.collect()`` then walks only what the runs made, not
    the whole test process (in a suite worker, after sympy's caches, torch and transformers: seconds a
    collection, 30 s of this file's 60 s in the suite). Where a caller froze objects of its own, nothing
    is frozen or thawed here."""
    import gc

    thaw = gc.get_freeze_count() == 0
    if thaw:
        gc.collect()
        gc.freeze()
    times = []
    try:
        for _ in range(repeats):
            gc.collect()
            gc.disable()
            try:
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            finally:
                gc.enable()
    finally:
        if thaw:
            gc.unfreeze()
    return min(times)


@pytest.mark.parametrize("layout, optimize", [
    (Layout(seq=256), []),
    (Layout(seq=256, recompute="full"), ["activation-offload"]),
    (Layout(seq=256, recompute="selective", pp=4, global_batch=8), []),
    (Layout(seq=256, pp=4, global_batch=2), ["flash-attention"]),
    (Layout(seq=256, pp=2, interleave=2, global_batch=8, tp=2, sp=True), ["fused-cross-entropy"]),
    (Layout(seq=256, dp=2, zero=1), ["optimizer-offload"]),
])
@pytest.mark.parametrize("name", ["gpt-7b", "llama-2-7b", "mixtral-8x7b"])
def test_allocation_events_equal_their_definition(name, layout, optimize):
    layout, options = apply(optimize, layout, T.MemoryOptions())
    tl = T.build(preset(name), layout, options)
    assert tl.allocation_events() == tl.allocation_events_reference()


def test_timeline_is_linear_in_depth():
    def run(layers):
        return lambda: (lambda tl: (tl.evaluate(), tl.reserved()))(T.build(gpt(layers), Layout(pp=4, global_batch=64)))
    run(16)()  # warm
    small, large = best_of(run(64)), best_of(run(128))
    assert large / small < 3.0, f"2× layers took {large / small:.2f}× (linear ≈ 2, quadratic ≈ 4)"


def test_timeline_is_linear_in_micro_batches_in_flight():
    def run(pp):
        return lambda: (lambda tl: (tl.evaluate(), tl.reserved()))(
            T.build(gpt(256), Layout(pp=pp, global_batch=1024)))
    run(4)()
    small, large = best_of(run(16)), best_of(run(32))  # in flight: p; layers per stage L/p: total copies ≈ L
    assert large / small < 3.0


def _trace(events: int, ooms: int) -> dict:
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "benchmarks"))
    from scale import synthetic_trace
    return synthetic_trace(events, ooms)


def test_snapshot_reader_is_linear_in_events_and_ooms():
    from symbolic.step.snapshot import analyse, loads

    # 4× the events: linear is ≈ 4×, quadratic 16×; the bound at 8× leaves room for a loaded machine
    small_data, large_data = pickle.dumps(_trace(20_000, 4_000)), pickle.dumps(_trace(80_000, 16_000))
    analyse(loads(small_data))  # warm up
    small = best_of(lambda: analyse(loads(small_data)), 5)
    large = best_of(lambda: analyse(loads(large_data)), 5)
    assert large / small < 8.0, f"4× events took {large / small:.2f}×"
    an = analyse(loads(large_data))
    assert len(an.ooms) == 16_000 and all(d.case == "A" for _, d in an.ooms)


def test_divisors_by_factorisation():
    def trial(n):
        small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
        return sorted(set(small + [n // k for k in small]))
    rng = random.Random(14)
    for n in list(range(1, 500)) + [rng.randrange(1, 10**8) for _ in range(50)] + [999983 * 999979, 2**31 - 1]:
        assert divisors(n) == trial(n), n
    assert len(divisors(10**16)) == 289 and divisors((2**61 - 1) * (2**31 - 1)) == [
        1, 2**31 - 1, 2**61 - 1, (2**61 - 1) * (2**31 - 1)]


def test_plan_on_ten_to_the_sixteen_gpus_enumerates_divisors():
    from symbolic.search.plan import plan

    result = plan(preset("gpt-175b"), 10**16, 80 * 10**9)
    assert result.evaluated > 0 and all(item.layout.gpus == 10**16 for item in result.ranked(3))


def test_a_sweep_past_the_layout_cap_is_refused_with_what_to_fix(monkeypatch):
    import symbolic.search.plan as P
    from symbolic.models.config import ConfigError

    import symbolic.search.enumeration as E
    monkeypatch.setattr(E, "MAX_LAYOUTS", 1000)
    with pytest.raises(ConfigError, match="more than 1,000 layouts.*fix some of --tp"):
        P.enumerate_layouts(preset("gpt-175b"), 1024, global_batch=1536)
