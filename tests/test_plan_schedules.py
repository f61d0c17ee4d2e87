"""plan and solve with a pipeline schedule (--schedule) and with layers that do not divide over p (issue 43):
Megatron-Core's uneven first/last splits searched and named, the schedules priced as the bill prices them."""
from dataclasses import replace

import numpy as np
import pytest

from symbolic import api
from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.layout.layout import Layout
from symbolic.layout.schedules import schedule_named
from symbolic.layout.stages import balanced_splits, stage_layers
from symbolic.ledgers.time import schedule_bubble, schedule_bubble_array
from symbolic.models.builtin import preset
from symbolic.models.config import ConfigError
from symbolic.search.plan import enumerate_layouts, plan

GB = 10**9


@pytest.mark.parametrize("layers, pp, splits", [
    (61, 16, ((1, 0), (2, 3), (3, 2), (0, 1))),    # DeepSeek-V3
    (70, 12, ((4, 0), (5, 5), (0, 4))),             # BLOOM
    (126, 16, ((6, 0), (7, 7), (0, 6))),            # Llama-3.1-405B
    (61, 2, ((30, 0), (31, 0))),
    (96, 8, ()),                                    # divides: even stages
])
def test_balanced_splits_are_megatrons_with_the_fullest_stage_at_the_ceiling(layers, pp, splits):
    assert balanced_splits(layers, pp) == splits
    seen = set()
    for first, last in splits:
        stages = stage_layers(layers, pp, 1, first, last)   # Megatron's rule reads them (get_num_layers_to_build)
        assert sum(stages) == layers and max(stages) == -(-layers // pp)
        seen.add(stages)
    assert len(seen) == len(splits)                  # each list of stage counts once


def test_enumeration_searches_the_splits_the_rule_set_accepts():
    """GPT-175B's 96 layers on p = 7 (and on 5): every split of balanced_splits the bill's rule set accepts is a
    layout, with its own first/last columns; without the search, none."""
    model = preset("gpt-175b")
    table, rules = enumerate_layouts(model, 56, global_batch=56, fixed={"tp": 8, "micro_batch": 1, "recompute": "none"})
    uneven = table["pp"] == 7
    assert uneven.any() and "uneven first/last" in rules[3]
    got = {(int(f), int(l)) for f, l in zip(table["first_layers"][uneven], table["last_layers"][uneven])}
    assert got == set(balanced_splits(96, 7)) == {(12, 0), (13, 13), (0, 12)}
    for i in np.flatnonzero(uneven):
        stages = stage_layers(96, 7, 1, int(table["first_layers"][i]), int(table["last_layers"][i]))
        assert (table["L_1"][i], table["L_m"][i], table["L_p"][i]) == (stages[0], stages[1], stages[-1])
        assert Layout(tp=8, pp=7, dp=1, global_batch=56, first_stage_layers=int(table["first_layers"][i]),
                      last_stage_layers=int(table["last_layers"][i]), zero=int(table["zero"][i]),
                      sp=bool(table["sp"][i])).is_valid(model)
    even = enumerate_layouts(model, 56, global_batch=56, fixed={"tp": 8, "micro_batch": 1, "recompute": "none"},
                             search_splits=False)[0]
    assert not (even["pp"] == 7).any()


def test_uneven_layouts_shown_are_the_bills_and_name_their_split():
    model = preset("gpt-175b")
    result = plan(model, 56, 80 * GB, global_batch=56, fixed={"tp": 8, "pp": 7}, margin=GB // 2)
    shown = result.ranked(5)
    assert shown
    for item in shown:
        assert item.layout.uneven_stages and len(item.split) == 3
        bill = make_bill(model, item.layout)
        for name in ("model_states_bytes", "activation_bytes", "total_bytes"):
            assert item.totals[name] == bill.totals[name]
        data = item.as_dict()
        assert data["stage_layers"] == list(item.split) and sum(item.split) + 4 * item.split[1] == 96
    best = api.plan("gpt-175b", gpus=56, gpu_memory="80GB", global_batch=56, tp=8, pp=7).best
    assert best["stage_layers"][1] == 14 and "first_stage_layers" in best


def test_deepseek_v3_on_2048_h800_at_pp16_ranks_layouts():
    """The issue's done-when: 61 layers at p = 16 used to be "no valid layout"."""
    result = plan(preset("deepseek-v3"), 2048, 80 * GB, seq=4096, global_batch=15360, margin=GB // 2,
                  hardware=None, fixed={"pp": 16, "tp": 1, "ep": 64, "micro_batch": 1, "zero": 1, "cp": 1},
                  loss="vocab-parallel")
    best = result.ranked(1)[0]
    assert best.layout.pp == 16 and best.split[1] == 4
    assert (best.layout.first_stage_layers, best.layout.last_stage_layers) in balanced_splits(61, 16)
    text = api.plan("deepseek-v3", gpus=2048, gpu="h800", seq=4096, global_batch=15360, pp=16, tp=1, ep=64,
                    micro_batch=1, zero=1, cp=1, top=3).text(160)
    assert "split" in text and "--first-stage-layers" in text.split("VERDICT")[1].split("\n")[1] + text


def test_zb_h1_plans_a_shorter_step_than_1f1b_and_equal_to_the_bills():
    """GPT-3 t8 p8 d16, 1,536 sequences on A100: the same layout under ZB-H1 is faster than under 1F1B, and the
    plan's step, memory and bubble are the bill's own doubles and bytes."""
    fixed = {"tp": 8, "pp": 8, "micro_batch": 1, "sp": True, "recompute": "none", "zero": 1}
    steps = {}
    for schedule in ("1f1b", "zb-h1", "zb-h2"):
        result = plan(preset("gpt-175b"), 1024, 80 * GB, global_batch=1536, fixed=fixed, schedule=schedule,
                      loss="vocab-parallel")
        (item,) = result.ranked(1)
        bill = api.bill("gpt-175b", tp=8, pp=8, dp=16, micro_batch=1, sp=True, zero=1, global_batch=1536,
                        schedule=schedule, gpu_memory="80GB", loss="vocab-parallel")
        assert item.step_seconds == float(bill.step.step_seconds)
        assert item.totals["total_bytes"] == make_bill(preset("gpt-175b"), item.layout).totals["total_bytes"]
        assert item.layout.schedule == schedule and item.as_dict()["schedule"] == schedule
        steps[schedule] = item.step_seconds
    assert steps["zb-h2"] < steps["zb-h1"] < steps["1f1b"]
    assert steps["1f1b"] == pytest.approx(19.377, abs=1e-3) and steps["zb-h1"] == pytest.approx(18.562, abs=1e-3)


@pytest.mark.parametrize("schedule", ["zb-v", "dualpipe", "dualpipev"])
def test_placed_schedules_show_the_bills_figures_and_say_the_screen(schedule):
    """A V or DualPipe puts both ends of the model on rank 0: the sweep screens at first order, each layout
    shown is the bill's (two parameter copies under DualPipe), and the plan says so."""
    result = plan(preset("gpt-175b"), 1024, 80 * GB, global_batch=1536, schedule=schedule, loss="vocab-parallel",
                  fixed={"tp": 8, "pp": 8, "sp": True, "zero": 1, "micro_batch": 1})
    item = result.ranked(1)[0]
    bill = make_bill(preset("gpt-175b"), item.layout)
    assert item.totals["total_bytes"] == bill.totals["total_bytes"]
    assert item.layout.interleave == (1 if schedule == "dualpipe" else 2)
    assert any("first-order share" in note for note in result.notes)
    if schedule == "dualpipe":
        even = make_bill(preset("gpt-175b"), replace(item.layout, schedule="zb-h1")).totals["model_states_bytes"]
        assert bill.totals["model_states_bytes"] > 1.9 * even


def test_schedule_is_a_no_op_at_p1_said_and_its_asserts_refuse():
    result = plan(preset("gpt-7b"), 16, 80 * GB, global_batch=64, schedule="zb-h1", fixed={"tp": 8})
    assert (result.table["pp"] == 1).any()
    assert any(note.startswith("--schedule zb-h1 is a no-op in") and "p = 1" in note for note in result.notes)
    p1 = int(np.flatnonzero(result.table["pp"] == 1)[0])
    assert result.layout_at(p1).schedule == ""
    # DualPipe asserts an even p (DualPipe.step): p = 3 has no layout to run it
    with pytest.raises(ConfigError, match="--schedule dualpipe runs"):
        plan(preset("gpt-7b"), 24, 80 * GB, global_batch=96, schedule="dualpipe", fixed={"tp": 8, "pp": 3})
    with pytest.raises(ConfigError, match="schedule must be one of"):
        plan(preset("gpt-7b"), 16, 80 * GB, schedule="gpipe")
    # the bill's rules for a V or DualPipe (each rank by its own layers): no levers, no hand-filled Ψ
    with pytest.raises(ConfigError, match="drop the lever"):
        plan(preset("llama-3-8b"), 16, 80 * GB, global_batch=64, schedule="dualpipe", levers={"lora": 8})
    with pytest.raises(ConfigError, match="drop --params"):
        plan(preset("gpt-7b"), 16, 80 * GB, global_batch=64, schedule="zb-v", params_hand=7 * 10**9)


def test_bubble_over_arrays_is_the_bills_bubble_layout_by_layout():
    plan_ = schedule_named("zb-h1")
    pp = np.array([4.0, 8.0, 8.0, 4.0])
    m = np.array([8.0, 16.0, 96.0, 8.0])
    pipelined = np.array([10.0, 20.0, 31.5, 12.25])
    f, w = np.array([0.3, 0.31, 0.33, 0.25]), np.array([0.3, 0.33, 0.2, 0.35])
    arrays = schedule_bubble_array(plan_, pp, np.ones(4), m, m, pipelined, f, w)
    for i in range(4):
        one, _ = schedule_bubble((plan_, 1, int(m[i])), int(pp[i]), float(m[i]), pipelined[i], f[i], w[i])
        assert arrays[i] == one


def test_solve_searches_the_splits_and_takes_a_schedule():
    limit = api.solve("gpt-175b", max="micro-batch", gpu_memory="80GB", tp=8, pp=7, dp=1, sp=True,
                      global_batch=56, recompute="selective")
    data = limit.to_dict()
    assert {(s["first_stage_layers"], s["last_stage_layers"]) for s in data["splits"]} == set(balanced_splits(96, 7))
    assert data["layout"]["stage_layers"][1] == 14 and data["check"]["fits"]
    assert limit.answer == max(s["micro_batch"] or 0 for s in data["splits"])
    one = api.solve("gpt-175b", max="seq", gpu_memory="80GB", tp=8, pp=8, dp=16, sp=True, global_batch=1536)
    zb = api.solve("gpt-175b", max="seq", gpu_memory="80GB", tp=8, pp=8, dp=16, sp=True, global_batch=1536,
                   schedule="zb-h2")
    assert zb.answer < one.answer   # ZB-H2 holds 2p − 1 micro-batches in flight on the first stage, 1F1B p
    assert zb.to_dict()["check"]["fits"] and zb.to_dict()["layout"]["schedule"] == "zb-h2"


def test_cli_plan_schedule(capsys):
    code = main(["plan", "gpt-175b", "--gpus", "1024", "--gpu", "a100", "--global-batch", "1536", "--tp", "8",
                 "--pp", "8", "--schedule", "zb-h1", "--brief"])
    out = capsys.readouterr().out
    assert code == 0 and "zb-h1 schedule" in out
    code = main(["plan", "gpt-175b", "--gpus", "64", "--gpu", "a100", "--schedule", "gpipe"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
