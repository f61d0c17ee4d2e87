"""Property tests: activations grow with s and b, never with t; SP <= TP-only; selective <= none."""
from hypothesis import given, settings
from hypothesis import strategies as st

from symbolic.core.dims import L, a, b, h, p, s, t
from symbolic.ledgers import activations
from symbolic.core.numeric import vectorize
from symbolic.layout.strategies import Strategy

ARGS = [s, b, h, a, t, L, p]
EXPRS = {name: vectorize(activations.stage(strategy), ARGS) for name, strategy in {
    "tp": Strategy(tensor_parallel=True),
    "tp_sp": Strategy(tensor_parallel=True, sequence_parallel=True),
    "tp_selective": Strategy(tensor_parallel=True, recompute="selective"),
    "tp_sp_selective": Strategy(tensor_parallel=True, sequence_parallel=True, recompute="selective"),
    "tp_sp_full": Strategy(tensor_parallel=True, sequence_parallel=True, recompute="full"),
    "tp_full": Strategy(tensor_parallel=True, recompute="full"),
}.items()}

dims = st.fixed_dictionaries({
    "s": st.integers(1, 1 << 17), "b": st.integers(1, 64), "heads": st.integers(1, 256),
    "head_dim": st.integers(1, 256), "t": st.integers(1, 64), "L": st.integers(1, 200), "p": st.integers(1, 64)})


def value(name, d, **override):
    d = dict(d, **override)
    return EXPRS[name](d["s"], d["b"], d["heads"] * d["head_dim"], d["heads"], d["t"], d["L"], d["p"])


@settings(max_examples=200, deadline=None)
@given(dims)
def test_grows_with_s_and_b_never_with_t(d):
    for name in EXPRS:
        here = value(name, d)
        assert value(name, d, s=d["s"] + 1) >= here
        assert value(name, d, b=d["b"] + 1) > here
        assert value(name, d, t=d["t"] + 1) <= here


@settings(max_examples=200, deadline=None)
@given(dims)
def test_sequence_parallel_and_selective_never_cost_more(d):
    assert value("tp_sp", d) <= value("tp", d)
    assert value("tp_selective", d) <= value("tp", d)
    assert value("tp_sp_selective", d) <= value("tp_sp", d)
    assert value("tp_sp_full", d) <= value("tp", d)


def test_full_recompute_stored_whole_loses_to_sp_for_large_t():
    """Korthikanti Table 2 keeps the layer input whole (2sbh) under TP without SP; with SP everything
    else is /t, so for t > 17 + 5as/(2h) storing all of TP+SP costs less than TP's full recompute
    (here s = h = a = 1: t > 19.5). Under SP full recompute keeps the input's sequence shard, 2sbh/t,
    which never loses."""
    d = {"s": 1, "b": 1, "heads": 1, "head_dim": 1, "L": 1, "p": 1}
    assert value("tp_full", d, t=19) < value("tp_sp", d, t=19)
    assert value("tp_full", d, t=20) > value("tp_sp", d, t=20)
    assert value("tp_sp_full", d, t=20) < value("tp_sp", d, t=20)


@settings(max_examples=200, deadline=None)
@given(dims)
def test_full_recompute_under_sp_is_the_least(d):
    assert value("tp_sp_full", d) <= value("tp_sp_selective", d)
    assert value("tp_sp_full", d) <= value("tp_full", d)
