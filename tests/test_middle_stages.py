"""The verdict over every pipeline stage (issue 39): the stages between the first and the last.

With uneven first/last counts (Megatron-Core's ``get_num_layers_to_build``, NVIDIA/Megatron-LM d98e8a6)
every middle stage holds L_m = (L − L_1 − L_p)/(p − 2) layers, and under 1F1B rank r holds p − r
micro-batches in flight: rank 1 can hold more than the first stage. A per-chunk layout or DeepSeek's
placed dense layers are accounted rank by rank.
"""
import json
from fractions import Fraction

import pytest

from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.layout.layout import Layout, in_flight
from symbolic.layout.stages import stage_mix
from symbolic.models.builtin import presets
from symbolic.models.config import ConfigError
from symbolic.search.plan import exact_totals, plan
from symbolic.step import timeline as T

LLAMA = presets()["llama-3-8b"]
#: the issue's example: 32 layers as 2 | 14 | 14 | 2, m = p = 4 micro-batches (the bill's default)
UNEVEN = Layout(pp=4, first_stage_layers=2, last_stage_layers=2, global_batch=4)
EVEN = Layout(pp=4, global_batch=4)


def test_llama_uneven_verdict_is_the_busiest_middle_stage():
    bill = make_bill(LLAMA, UNEVEN)
    totals = bill.totals
    assert (totals["verdict_stage"], totals["verdict_stage_rank"]) == ("middle", 1)
    assert totals["verdict_stage_words"] == "stage 2 of 4 (the busiest of the middle stages)"
    assert totals["total_bytes"] == 91_366_715_392 == totals["peak_middle_stage_bytes"]
    # before issue 39 the verdict was the first stage's 15.22 GB; it stays that stage's own peak
    assert totals["peak_first_stage_bytes"] == 15_215_366_144
    assert totals["total_bytes"] > make_bill(LLAMA, EVEN).totals["total_bytes"] == 59_049_525_248


def test_llama_middle_stage_figures_computed_apart():
    """Stage 2 of 4 by hand: its 14 layers' model states (Psi·14/32 per block, whole bytes rounded up, as
    the first stage's) and 3 micro-batches × 14 layers of the even split's per-layer activations."""
    parts = make_bill(LLAMA, UNEVEN).totals["verdict_parts"]
    even = make_bill(LLAMA, EVEN).totals
    psi = even["params"]
    assert sum(-(-k * psi * 14 // 32) for k in (2, 2, 4, 4, 4)) == parts["model_states"] == 56_211_828_736
    # the even split's peak holds 4 in flight × 8 layers at the same instant (backward, last layer's MLP half)
    assert even["verdict_phase"] == make_bill(LLAMA, UNEVEN).totals["verdict_phase"]
    assert Fraction(even["verdict_parts"]["activations"]) * Fraction(3 * 14, 4 * 8) == parts["activations"]
    assert parts["activations"] == 34_550_906_880


def test_llama_middle_stage_is_the_timelines_and_the_schedules():
    bill = make_bill(LLAMA, UNEVEN)
    assert T.build(LLAMA, UNEVEN, stage="middle").evaluate().peak == bill.totals["total_bytes"]
    assert T.build(LLAMA, UNEVEN, stage=1).evaluate().peak == bill.totals["total_bytes"]
    # the same split as a per-chunk layout, accounted rank by rank: stage 2 of 4 again, the same layer
    # copies alive (its model states count the stage's own 14 layers, no embedding share)
    layout = Layout(pp=4, pipeline_layout="Et*2|t*14|t*14|t*2L", global_batch=4)
    exact = make_bill(LLAMA, layout).totals
    assert exact["verdict_stage"] == "rank1" and exact["verdict_stage_words"] == "stage 2 of 4"
    assert exact["verdict_parts"]["activations"] == bill.totals["verdict_parts"]["activations"]
    assert exact["total_bytes"] == T.build(LLAMA, layout, stage=1).evaluate().peak == 84_011_974_656


@pytest.mark.parametrize("pp, v, batch", [(4, 1, 2), (4, 1, 4), (4, 1, 16), (4, 2, 4), (4, 2, 8), (4, 2, 12),
                                          (8, 2, 16), (6, 2, 12)])
def test_middle_in_flight_is_the_simulated_schedules(pp, v, batch):
    """Rank 1's chunks in flight by the layout's rule equal Megatron's schedule simulated (layout.stages)."""
    ends = 2 if pp == 4 else 4
    layout = Layout(pp=pp, interleave=v, global_batch=batch, first_stage_layers=ends, last_stage_layers=ends)
    mix = stage_mix(LLAMA, layout, 1)
    assert layout.in_flight("middle") == max(m.chunks_held for m in mix.moments) + 1
    assert in_flight(pp, 1, batch, "middle") == min(batch, pp - 1)


def test_deepseek_first_stage_layers_agree_with_the_explicit_layout():
    """--first-stage-layers 1 on PP16: 1 | 4 × 15 layers; the same as a per-chunk layout. Stage 3 of 16
    (4 MoE layers, 14 in flight) is the busiest, far above the first (60.60 GB) and the last (63.18 GB)."""
    model = presets()["deepseek-v3"]
    uneven = make_bill(model, Layout(pp=16, ep=64, dp=128, global_batch=2048, first_stage_layers=1)).totals
    layout = Layout(pp=16, ep=64, dp=128, global_batch=2048, pipeline_layout="Et|(t*4|)*14t*4L")
    explicit = make_bill(model, layout).totals
    keys = ("total_bytes", "verdict_stage", "verdict_phase", "verdict_parts", "peak_first_stage_bytes",
            "peak_middle_stage_bytes", "peak_last_stage_bytes", "verdict_stage_words")
    assert {k: uneven[k] for k in keys} == {k: explicit[k] for k in keys}
    assert uneven["total_bytes"] == 231_712_620_544 and uneven["verdict_stage_words"] == "stage 3 of 16"
    assert (uneven["peak_first_stage_bytes"], uneven["peak_last_stage_bytes"]) == (60_596_420_608, 63_175_098_372)
    assert T.build(model, layout, stage=2).evaluate().peak == uneven["total_bytes"]


def test_even_split_is_unchanged():
    totals = make_bill(LLAMA, EVEN).totals
    assert (totals["total_bytes"], totals["verdict_stage"]) == (59_049_525_248, "first")
    assert not {"peak_middle_stage_bytes", "verdict_stage_words", "verdict_stage_rank"} & set(totals)
    from symbolic.bill.derive import derive
    assert {key.split("|")[1] for key in derive(LLAMA, EVEN).formulas if key.startswith("peak|")} == {"first", "last"}


def test_plan_and_its_exact_totals_count_the_middle_stage():
    for layout in (UNEVEN, Layout(pp=4, first_stage_layers=2, last_stage_layers=2),
                   Layout(pp=4, interleave=2, first_stage_layers=2, last_stage_layers=2, global_batch=8),
                   Layout(pp=2, first_stage_layers=10, global_batch=4)):
        assert exact_totals(LLAMA, layout)["total_bytes"] == make_bill(LLAMA, layout).totals["total_bytes"], layout
    result = plan(LLAMA, 4, 80 * 10**9, global_batch=4, first_stage_layers=2, last_stage_layers=2,
                  fixed={"pp": 4, "tp": 1, "recompute": "none"})
    totals = [(result.layout_at(i), result.table["total_bytes"][i], bool(result.table["fits"][i]))
              for i in range(result.evaluated)]
    assert totals
    for layout, total, fits in totals:
        bill = make_bill(LLAMA, layout).totals["total_bytes"]
        assert total == pytest.approx(bill, rel=1e-12)
        assert fits == (bill <= 80 * 10**9 - result.margin)


def test_cli_json_and_brief_name_the_stage(capsys):
    args = ["bill", "llama-3-8b", "--pp", "4", "--first-stage-layers", "2", "--last-stage-layers", "2", "--gpu", "h100",
            "--framework", "none"]  # the bill's own recipe (p = 4 of an HF config otherwise assumes megatron-core's)
    assert main(args + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["verdict_stage"], data["verdict_stage_rank"], data["total_bytes"]) == ("middle", 1, 91_366_715_392)
    main(args + ["--brief"])
    out = capsys.readouterr().out
    assert "DOES NOT FIT in 80.00 GB: 91.37 GB" in out
    assert "at the backward, last layer (MLP half) of stage 2 of 4 (the busiest of the middle stages)" in " ".join(out.split())


def test_timeline_refuses_a_middle_stage_even_stages_do_not_have():
    with pytest.raises(ConfigError, match="first") as error:
        T.build(LLAMA, EVEN, stage="middle")
    assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="rank"):
        T.build(LLAMA, UNEVEN, stage=2)  # stages 2 … p − 2 hold alike: rank 1 stands for them


def test_solve_is_bound_by_the_middle_stage():
    """solve's largest s for the uneven split is the bill's: the middle stage binds it, far below the even
    split's (7,214 tokens)."""
    from dataclasses import replace

    from symbolic.search.solve import solve_limit
    limit = solve_limit(LLAMA, UNEVEN, "seq", 80 * 10**9, margin=500_000_000)
    assert (limit.answer, limit.instant) == (2710, "middle stage, backward, last layer (MLP half)")
    assert make_bill(LLAMA, replace(UNEVEN, seq=2710)).totals["total_bytes"] == 79_493_751_520 <= 79_500_000_000
    assert make_bill(LLAMA, replace(UNEVEN, seq=2711)).totals["total_bytes"] == 79_502_317_872 > 79_500_000_000
    assert solve_limit(LLAMA, EVEN, "seq", 80 * 10**9, margin=500_000_000).answer == 7214


@pytest.mark.parametrize("layout, total", [
    (Layout(pp=4, interleave=2, first_stage_layers=2, last_stage_layers=2, global_batch=8), 108_642_168_832),
    (Layout(pp=4, interleave=2, first_stage_layers=2, last_stage_layers=2, global_batch=4), 102_883_684_352),
    (Layout(pp=4, first_stage_layers=2, last_stage_layers=2, global_batch=2), 79_849_746_432),  # m < p: capped
])
def test_middle_stage_is_the_timelines_under_interleaving_and_few_micro_batches(layout, total):
    totals = make_bill(LLAMA, layout).totals
    assert totals["verdict_stage"] == "middle"
    assert totals["total_bytes"] == totals["peak_middle_stage_bytes"] == total
    assert T.build(LLAMA, layout, stage="middle").evaluate().peak == total
