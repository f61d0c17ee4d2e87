"""derive's memoised pieces (lines and verdict formulas shared by the kinds of a loop) give each kind
the derivation it has alone: kinds that differ in one choice, derived in either order from empty memos."""
import functools

import pytest

from symbolic.bill import derive as derive_module
from symbolic.bill.derive import derive
from symbolic.layout.layout import Layout
from symbolic.models.builtin import preset

#: kinds of one model that differ in one choice each (ZeRO, dp, micro-batches, recompute, SP, offload, ...)
KINDS = [
    ("gpt-22b", Layout(tp=4, dp=2, global_batch=16)),
    ("gpt-22b", Layout(tp=4, dp=2, zero=1, global_batch=16)),
    ("gpt-22b", Layout(tp=4, dp=2, zero=3, global_batch=16)),
    ("gpt-22b", Layout(tp=4, dp=8, zero=3, global_batch=64)),
    ("gpt-22b", Layout(tp=4, dp=2, zero=3, global_batch=32)),
    ("gpt-22b", Layout(tp=4, sp=True, dp=2, zero=3, global_batch=16)),
    ("gpt-22b", Layout(tp=4, pp=2, dp=2, zero=1, recompute="selective", global_batch=16)),
    ("gpt-22b", Layout(tp=4, pp=2, dp=2, zero=1, recompute="full", global_batch=16)),
    ("gpt-22b", Layout(tp=4, dp=2, recompute="full", activation_offload=True, global_batch=16)),
    ("gpt-22b", Layout(tp=4, dp=2, lora=16, global_batch=16)),
    ("gpt-22b", Layout(tp=4, dp=2, zero=3, optimizer_impl="fused", global_batch=16)),
    ("mixtral-8x7b", Layout(tp=2, dp=4, ep=2, zero=1)),
    ("mixtral-8x7b", Layout(tp=2, dp=4, ep=4, zero=1)),
]


def _clear_memos() -> None:
    for value in vars(derive_module).values():
        if isinstance(value, functools._lru_cache_wrapper):
            value.cache_clear()


@pytest.mark.parametrize("order", ["forward", "backward"])
def test_each_kind_derives_the_same_whatever_was_derived_before(order):
    kinds = KINDS if order == "forward" else KINDS[::-1]
    alone = []
    for name, layout in kinds:
        _clear_memos()
        alone.append(derive(preset(name), layout.validate(preset(name))))
    _clear_memos()
    after_others = [derive(preset(name), layout.validate(preset(name))) for name, layout in kinds]
    assert after_others == alone
    assert len({derived.to_json() for derived in alone}) == len(kinds)  # every kind its own derivation
