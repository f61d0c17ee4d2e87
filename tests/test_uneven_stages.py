"""Uneven pipeline stages: Megatron-Core's num_layers_in_first/last_pipeline_stage
(``get_num_layers_to_build``) in the layout, bill, timeline, plan and solve."""
import json
import random
from dataclasses import replace
from fractions import Fraction

import pytest

from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.layout.layout import Layout, stage_layers
from symbolic.models.builtin import preset
from symbolic.models.config import ConfigError
from symbolic.search.plan import plan
from symbolic.search.solve import solve_limit
from symbolic.step import timeline as T

GB = 10**9


def megatron_layers_to_build(num_layers, pp_size, vp_size, first, last, pp_rank):
    """Megatron-Core's get_num_layers_to_build for one rank (first/last None when 0), written
    from its source as an independent oracle: returns the layers of the rank (all its chunks)
    or raises AssertionError where Megatron asserts."""
    if first or last:
        layers_to_distribute, stages_left = num_layers, pp_size
        if first:
            layers_to_distribute -= first
            stages_left -= 1
        if last:
            layers_to_distribute -= last
            stages_left -= 1
        if stages_left > 0:
            assert layers_to_distribute % stages_left == 0
            per_rank = layers_to_distribute // stages_left
        else:
            per_rank = 0
        if pp_rank == 0 and first:
            per_rank = first
        if pp_rank == pp_size - 1 and last:
            per_rank = last
    else:
        assert num_layers % pp_size == 0
        per_rank = num_layers // pp_size
    if vp_size > 1:
        assert per_rank % vp_size == 0
    return per_rank


def test_stage_layers_agree_with_megatron_on_random_splits():
    rng = random.Random(11)
    checked = 0
    for _ in range(3000):
        layers, pp, v = rng.randint(2, 96), rng.choice([2, 3, 4, 8, 16]), rng.choice([1, 1, 2, 4])
        first, last = rng.choice([0, rng.randint(1, 20)]), rng.choice([0, rng.randint(1, 20)])
        if not (first or last):
            continue
        try:
            oracle = tuple(megatron_layers_to_build(layers, pp, v, first, last, r) for r in range(pp))
            valid = all(n > 0 for n in oracle) and sum(oracle) == layers
        except AssertionError:
            valid = False
        if valid:
            assert stage_layers(layers, pp, v, first, last) == oracle
            checked += 1
        else:
            with pytest.raises(ConfigError):
                stage_layers(layers, pp, v, first, last)
    assert checked > 100


def test_deepseek_v3_splits():
    # Megatron-Bridge's DeepSeek-V3 on PP4: 16/16/16/13 (61 layers, the last stage given).
    assert stage_layers(61, 4, last=13) == (16, 16, 16, 13)
    assert stage_layers(61, 16, first=3, last=2) == (3,) + (4,) * 14 + (2,)
    # Seed 004 §08's PP = 16 cache (derivations/seed_004.toml, L_1 = 4): 15 stages of 4, the last of 1.
    assert stage_layers(61, 16, last=1) == (4,) * 15 + (1,)
    # PP4 × VPP4: every stage's count must be a multiple of 4, and 61 is not: no split is valid.
    for first in range(1, 30):
        with pytest.raises(ConfigError, match="61 is not a multiple of 4"):
            stage_layers(61, 4, 4, first=first)


@pytest.mark.parametrize("kwargs, message", [
    (dict(pp=1, first_stage_layers=4), "set pp > 1"),
    (dict(pp=4, first_stage_layers=5, last_stage_layers=6), "divide evenly over the 2 other stages"),
    (dict(pp=2, first_stage_layers=5, last_stage_layers=5), "equal the layers"),
    (dict(pp=4, interleave=2, first_stage_layers=5), "divisible by 2"),
])
def test_invalid_splits_are_refused_with_one_line(kwargs, message):
    model = preset("gpt-7b")
    with pytest.raises(ConfigError, match=message):
        Layout(**kwargs).validate(model)


def test_uneven_split_equal_to_the_even_one_changes_nothing():
    model = preset("gpt-7b")  # 32 layers
    even, same = Layout(pp=4, tp=2), Layout(pp=4, tp=2, first_stage_layers=8)
    uneven_totals = dict(make_bill(model, same).totals)
    # the given counts make a middle stage a candidate of the verdict; with the even split it holds
    # the first stage's layers with one micro-batch fewer in flight, so it never exceeds the first
    middle = uneven_totals.pop("peak_middle_stage_bytes")
    assert make_bill(model, even).totals == uneven_totals
    assert middle <= uneven_totals["peak_first_stage_bytes"]  # equal where the optimizer step is the peak
    assert T.peak(model, even)[1] == T.peak(model, same)[1]


@pytest.mark.parametrize("interleave, first", [(1, 5), (2, 2), (2, 14)])
def test_the_first_stage_holds_its_real_layer_count(interleave, first):
    model = preset("gpt-7b")
    even = Layout(pp=4, interleave=interleave, global_batch=8)
    uneven = replace(even, first_stage_layers=first)
    share = Fraction(first, model.layers // 4)
    a, b = make_bill(model, even).totals, make_bill(model, uneven).totals
    assert Fraction(b["activation_bytes"]) == share * Fraction(a["activation_bytes"])
    assert Fraction(b["model_states_bytes"]) == share * Fraction(a["model_states_bytes"])
    # params_per_gpu: the first stage's layers, and the embedding whole.
    layer = (a["params_per_gpu"] - model.vocab * model.hidden - model.seq * model.hidden) // (model.layers // 4)
    assert b["params_per_gpu"] == first * layer + model.vocab * model.hidden + model.seq * model.hidden


def test_61_layers_bill_timeline_and_refusal_on_the_command_line(capsys):
    model = replace(preset("gpt-7b"), name="gpt-61", layers=61)
    layout = Layout(pp=4, last_stage_layers=13)
    assert layout.values(model)["L_1"] == 16
    bill = make_bill(model, layout)
    per_layer = make_bill(replace(model, layers=64), Layout(pp=4)).totals["activation_bytes"]  # 16 layers too
    assert bill.totals["activation_bytes"] == per_layer
    assert T.peak(model, layout)[1] > 0
    assert main(["bill", "gpt-7b", "--pp", "4", "--interleave", "4", "--first-stage-layers", "4",
                 "--last-stage-layers", "6"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "divisible by 4" in err and "4/11/11/6" in err
    assert main(["bill", "gpt-7b", "--pp", "4", "--first-stage-layers", "5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # without --global-batch the command line bills the pipeline's steady state, m = p = 4 micro-batches
    assert data["activation_bytes"] == make_bill(preset("gpt-7b"), Layout(pp=4, first_stage_layers=5,
                                                                          global_batch=4)).totals["activation_bytes"]


def test_plan_and_solve_account_the_first_stage():
    model = preset("gpt-7b")
    result = plan(model, 16, 80 * GB, first_stage_layers=5, last_stage_layers=9)
    listed = result.ranked(0)
    assert listed and {item.layout.pp for item in listed} == {4, 8}  # 18 layers left: 3 or 9 per middle stage
    assert all(item.layout.first_stage_layers == 5 for item in listed)
    for item in random.Random(5).sample(listed, 6) + listed[:2]:
        bill = make_bill(model, item.layout)
        assert item.totals["total_bytes"] == bill.totals["total_bytes"]
    limit = solve_limit(model, Layout(pp=4, first_stage_layers=5, last_stage_layers=9), "micro_batch", 141 * GB)
    assert limit.answer_fits() and limit.next_fits() is False


def test_derive_prints_the_first_stage_in_l1(capsys):
    assert main(["derive", "activations-total", "--tp", "--pipeline", "--uneven"]) == 0
    out = capsys.readouterr().out
    assert "L_1" in out and "L*" not in out  # p micro-batches in flight × L_1 layers: no L/p left
    assert main(["derive", "activations-total", "--uneven"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
