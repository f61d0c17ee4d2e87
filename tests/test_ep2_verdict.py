"""ep2's features in the verdict (main's bill total = the step's peak on the busiest GPU):
uneven stages (the first stage's L_1 layers and states, the last stage's L_p), FP8 linear
inputs, the expert-parallel all-to-all's staging, and the low-precision recipes — the bill's
total equals the timeline's peak on the busiest stage and the plan's exact totals."""
import pytest

from symbolic.bill.derive import make_bill
from symbolic.core.numeric import exact
from symbolic.layout.layout import Layout
from symbolic.models.builtin import preset
from symbolic.search.plan import exact_totals
from symbolic.step import timeline as T


def timeline_peaks(model, layout) -> dict:
    stages = (("first", "middle", "last") if layout.middle_stage else ("first", "last")) if layout.pp > 1 else ("first",)
    return {stage: T.build(model, layout, stage=stage).evaluate().peak for stage in stages}


CASES = [
    ("gpt-7b", Layout(tp=2, pp=4, dp=2, first_stage_layers=5, global_batch=16)),
    ("gpt-7b", Layout(tp=2, pp=4, last_stage_layers=2, global_batch=8, fp8_activations=True)),
    ("llama-2-7b", Layout(tp=2, pp=3, first_stage_layers=12, last_stage_layers=8, global_batch=6)),
    ("llama-2-7b", Layout(tp=2, pp=2, first_stage_layers=2, global_batch=4, optimizer="fp8-adam")),
    ("mixtral-8x7b", Layout(tp=2, pp=2, dp=4, ep=4, sp=True, global_batch=16, fp8_activations=True)),
    ("mixtral-8x7b", Layout(tp=2, pp=2, dp=4, ep=4, sp=True, global_batch=16, first_stage_layers=14,
                            moe_capacity=2, optimizer="bf16-adam-bf16-moments")),
    ("gpt-7b", Layout(tp=2, dp=2, fp8_activations=True, optimizer="deepseek-v3")),
]


@pytest.mark.parametrize("name,layout", CASES)
def test_bill_total_is_the_timeline_peak_and_the_plans(name, layout):
    model = preset(name)
    bill = make_bill(model, layout)
    peaks = timeline_peaks(model, layout)
    assert bill.totals["total_bytes"] == max(peaks.values())
    assert bill.totals["total_bytes"] == exact_totals(model, layout)["total_bytes"]
    for stage, value in peaks.items():
        assert bill.totals[f"peak_{stage}_stage_bytes"] == value


def test_the_last_stage_counts_its_own_layers():
    """A last stage of one layer (DeepSeek-V3's 61 = 15 × 4 + 1 shape) holds one layer's states
    and activations plus the output side, far below the even split's."""
    model = preset("gpt-7b")  # 32 layers
    layout = Layout(tp=2, pp=4, first_stage_layers=11, last_stage_layers=1, global_batch=8)
    assert (layout.values(model)["L_1"], layout.values(model)["L_p"]) == (11, 1)
    uneven = make_bill(model, layout)
    even = make_bill(model, Layout(tp=2, pp=4, global_batch=8))
    assert uneven.totals["peak_last_stage_bytes"] < even.totals["peak_last_stage_bytes"]
    assert uneven.totals["peak_first_stage_bytes"] > even.totals["peak_first_stage_bytes"]


def test_the_all_to_all_staging_is_in_the_verdicts_communication():
    model = preset("mixtral-8x7b")
    layout = Layout(tp=2, pp=2, dp=4, ep=4, sp=True, global_batch=16)
    bill = make_bill(model, layout)
    staged = sum(size for name, size in
                 ((line.name, line.value) for line in bill.ledger("communication")) if "all-to-all staging" in name)
    assert staged > 0
    assert staged == sum(exact(size, layout.values(model)) for _, size in T.expert_all_to_all_staging(model, layout))
    without = make_bill(model, Layout(tp=2, pp=2, dp=4, ep=1, sp=True, global_batch=16))
    assert not any("all-to-all staging" in line.name for line in without.ledger("communication"))
    verdict_comm = next(line.value for line in bill.ledger("verdict") if line.name == "peak/communication")
    assert verdict_comm >= staged


def test_the_plans_vectorised_verdict_is_the_exact_one_with_uneven_stages():
    import numpy as np

    from symbolic.search.plan import plan
    model = preset("gpt-7b")
    result = plan(model, 16, 80 * 10**9, global_batch=32, first_stage_layers=5, fp8_activations=True)
    assert result.evaluated > 0 and set(result.table["pp"]) - {1}
    for i in np.random.default_rng(0).choice(result.evaluated, 20, replace=False):
        layout = result.layout_at(int(i))
        assert layout.first_stage_layers == 5 and layout.fp8_activations
        assert result.table["total_bytes"][i] == pytest.approx(float(exact_totals(model, layout)["total_bytes"]),
                                                               rel=1e-12)
