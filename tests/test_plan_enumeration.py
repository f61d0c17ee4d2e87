"""plan's enumeration gives exactly the layouts the one rule set accepts (``Layout.is_valid``).

``enumerate_layouts`` validates each (v, ZeRO, SP, expert grid) of a (c, t, p) block once, at the first
micro-batch size the block admits, and builds the block's rows with numpy (issue 24: the 32,976
per-layout validations were most of a cold plan). These tests build every candidate layout — every
divisor choice of t, p, c, b, v, every ZeRO stage, SP on and off, every expert grid — and keep those
``Layout.is_valid`` accepts, as the bill, solve and timeline would, then compare row for row, in order.
"""
import itertools

import numpy as np
import pytest

from symbolic.layout.layout import Layout, settle_no_ops
from symbolic.models.builtin import preset
from symbolic.models.config import ConfigError
from symbolic.search.plan import RECOMPUTE_ORDER, divisors, enumerate_layouts

NAMES = ("tp", "pp", "dp", "micro_batch", "interleave", "zero", "sp", "recompute", "micro_batches", "cp",
         "ep", "etp", "L_1", "L_p", "L_m")


def _accepted(model, gpus, *, seq=0, global_batch=0, max_micro_batch=16, gpus_per_node=8, fixed=None,
              first_stage_layers=0, last_stage_layers=0, levers=None):
    """Every candidate layout ``Layout.is_valid`` accepts, as enumerate_layouts' rows, in its order
    (c, t, p, b, v, ZeRO, SP, ep, etp, recompute ascending). Beside the rule set, plan's own sweep
    choices: t and e_t within a node (Narayanan et al. 2021 §3.3), a flag that changes nothing
    (SP at t = 1, ZeRO at d·c = 1: ``settle_no_ops``) swept once, ``fixed`` sizes held."""
    fixed = dict(fixed or {})
    s_ = seq or model.seq
    width = model.expert_ffn or model.ffn or 4 * model.hidden
    grids = ([(ep, etp) for ep in divisors(model.experts) for etp in divisors(width) if etp <= gpus_per_node]
             if model.experts else [(1, 0)])
    micro_all = (divisors(global_batch) if global_batch else
                 [1 << k for k in range(max_micro_batch.bit_length()) if 1 << k <= max_micro_batch])
    rows = []
    for cp, tp, pp in itertools.product(divisors(gpus), repeat=3):
        if gpus % (cp * tp * pp) or tp > gpus_per_node:
            continue
        dp = gpus // (cp * tp * pp)
        for mb, vv, zero, sp, (ep, etp), rc in itertools.product(micro_all, divisors(model.layers), range(4),
                                                                 (False, True), grids, range(3)):
            layout = Layout(micro_batch=mb, seq=seq, tp=tp, pp=pp, dp=dp, sp=sp, interleave=vv, zero=zero,
                            global_batch=global_batch, cp=cp, ep=ep, etp=0 if etp == tp else etp,
                            recompute=RECOMPUTE_ORDER[rc], first_stage_layers=first_stage_layers,
                            last_stage_layers=last_stage_layers, **(levers or {}))
            if settle_no_ops(layout)[0] != layout or not layout.is_valid(model):
                continue
            held = dict(tp=tp, pp=pp, dp=dp, cp=cp, micro_batch=mb, interleave=vv, zero=zero, sp=sp, ep=ep,
                        etp=etp, recompute=RECOMPUTE_ORDER[rc])
            # a fixed ZeRO stage over one data-parallel rank is ZeRO-0, fixed SP at t = 1 no SP (settled)
            settled = dict(held, zero=fixed["zero"] if dp * cp == 1 and "zero" in fixed else zero,
                           sp=fixed["sp"] if tp == 1 and "sp" in fixed else sp)
            if any(settled[name] != value for name, value in fixed.items()):
                continue
            stages = layout.stage_layer_counts(model) if layout.uneven_stages else (model.layers // pp,) * pp
            m = layout.iteration_micro_batches()
            rows.append((cp, tp, pp, mb, vv, zero, sp, ep, etp, rc,
                         (tp, pp, dp, mb, vv, zero, int(sp), rc, m, cp, ep, etp or tp, stages[0], stages[-1],
                          stages[1] if pp > 2 else stages[0])))  # L_m: a middle stage's, the first's at p ≤ 2
    assert s_  # the model's sequence length is known
    rows.sort(key=lambda row: row[:10])
    return [row[-1] for row in rows]


CASES = [
    ("gpt-175b", 16, dict(global_batch=32)),
    ("gpt-22b", 12, dict(global_batch=24)),
    ("gpt-22b", 16, dict()),  # no global batch: b over the powers of two, m = 1
    ("llama-3-8b", 32, dict(global_batch=64)),
    ("gpt-22b", 32, dict(global_batch=64, first_stage_layers=4)),  # uneven stages
    ("gpt-22b", 16, dict(global_batch=32, fixed={"tp": 2, "zero": 1})),
    ("gpt-22b", 16, dict(global_batch=32, fixed={"interleave": 2})),
    ("llama-3-8b", 16, dict(global_batch=32, levers={"offload": "params"})),  # a lever's rule: no t or p
    ("llama-3-8b", 16, dict(global_batch=32, levers={"lora": 16, "base_dtype": "nf4"})),
    ("mixtral-8x7b", 8, dict(global_batch=8)),  # expert grids: ep, etp, SP under etp ≠ t
]


@pytest.mark.parametrize("name, gpus, options", CASES, ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_enumeration_is_every_layout_the_rule_set_accepts(name, gpus, options):
    model = preset(name)
    table, _ = enumerate_layouts(model, gpus, **options)
    got = [tuple(int(table[n][i]) for n in NAMES) for i in range(len(table["tp"]))]
    expected = _accepted(model, gpus, **options)
    assert len(got) > 0
    assert got == expected


def test_enumeration_columns_are_int64_of_one_length():
    table, _ = enumerate_layouts(preset("gpt-175b"), 1024, global_batch=1536)
    names = NAMES + ("first_layers", "last_layers")  # each layout's split (Megatron's first/last, 0: even)
    assert set(table) == set(names)
    assert {table[n].dtype for n in names} == {np.dtype(np.int64)}
    assert {len(table[n]) for n in names} == {98_928}  # the README's figure for GPT-3 on 1024 GPUs


def test_no_valid_layout_is_an_empty_table_and_too_many_a_refusal(monkeypatch):
    table, _ = enumerate_layouts(preset("gpt-22b"), 7, global_batch=7, fixed={"tp": 7})
    assert {len(column) for column in table.values()} == {0}
    import symbolic.search.enumeration as E
    monkeypatch.setattr(E, "MAX_LAYOUTS", 100)
    with pytest.raises(ConfigError, match="more than 100 layouts"):
        enumerate_layouts(preset("gpt-22b"), 64, global_batch=64)


def test_divisors_equal_sympys():
    """``plan.divisors`` (trial division up to ``TRIAL_DIVISION_MAX``, sympy's above) against
    ``sympy.divisors``: every n ≤ 20,000, powers, primes and hard composites on both sides of the bound."""
    import sympy

    from symbolic.search.plan import TRIAL_DIVISION_MAX

    cases = list(range(1, 20_001)) + [2**k for k in range(15, 41)] + [
        TRIAL_DIVISION_MAX - 1, TRIAL_DIVISION_MAX, TRIAL_DIVISION_MAX + 1, 9_999_999_967,  # the largest prime < 10^10
        99_991 * 99_989, 7**3 * 13**2 * 9_973, 3**20, 2**61 - 1, (2**31 - 1) * (2**61 - 1), 12_288 * 1_000_003]
    for n in cases:
        assert divisors(n) == [int(x) for x in sympy.divisors(n)], n
    assert divisors(1024) == [2**k for k in range(11)] and len(divisors(10**16)) == 289
