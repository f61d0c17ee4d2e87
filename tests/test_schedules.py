"""Pipeline schedules as data (symbolic.layout.schedules): each order against its reference code, the
in-flight counts and the bubble its order gives against the papers' formulas, and what the bill and
the timeline read from them."""
import json
from types import SimpleNamespace

import pytest

from symbolic.cli import main
from symbolic.layout import schedules as S
from symbolic.layout.layout import Layout, in_flight
from symbolic.layout.stages import chunk_ranges, schedule
from symbolic.models.builtin import presets
from symbolic.models.config import ConfigError

F, B, W = 1.0, 1.2, 0.8   # unequal F, B (input gradient), W (weight gradient) of one chunk


# --- the orders, against the reference code ---------------------------------------------------------------

def _torch_order(cls, p, m):
    """PyTorch's own order of ``cls`` (torch/distributed/pipelining/schedules.py), computed without a
    process group: its ``_calculate_single_rank_operations`` on the attributes it reads."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    self = SimpleNamespace(pp_group_size=p, num_stages=2 * p, _num_stages=2 * p, _n_microbatches=m)
    kinds = {"F": "F", "I": "B", "B": "B", "W": "W"}

    def flat(action, paired=False):   # an OVERLAP_F_B action is its F and B sub-actions, run as a pair
        if action.sub_actions is not None:
            return [op for sub in action.sub_actions for op in flat(sub, True)]
        kind = kinds[action.computation_type.value]
        return [(kind, action.microbatch_index, 0 if action.stage_index == rank else 1, paired)]
    out = {}
    for rank in range(p):
        ops = getattr(schedules, cls)._calculate_single_rank_operations(self, rank)
        out[rank] = [op for a in ops if a is not None for op in flat(a)]
    return out


def _ours(name, p, m, paired=False):
    return {rank: [op if paired else op[:3] for op in S.order(name, p, 2, m, rank)] for rank in range(p)}


@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (4, 11), (8, 16)])
def test_zb_v_is_torchs_order(p, m):
    assert _ours("zb-v", p, m) == {r: [op[:3] for op in ops] for r, ops in _torch_order("ScheduleZBVZeroBubble", p, m).items()}


@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (4, 10), (8, 16)])
def test_dualpipev_is_torchs_order_up_to_whole_backwards(p, m):
    # torch's ScheduleDualPipeV (a port of DualPipe's dualpipev.py) writes step 6's backwards without zero
    # bubble as FULL_BACKWARD; ours as a B with no W after it — the same op
    theirs = _torch_order("ScheduleDualPipeV", p, m)
    ours = _ours("dualpipev", p, m, paired=True)
    for rank in range(p):
        assert [op for op in theirs[rank] if op[0] != "W"] == [op for op in ours[rank] if op[0] != "W"]
        assert sorted(op for op in theirs[rank] if op[0] == "W") == sorted(op for op in ours[rank] if op[0] == "W")


def test_megatron_orders_are_the_stages_schedule():
    for p, v, m in ((4, 1, 8), (4, 2, 8), (8, 3, 16)):
        name = "interleaved" if v > 1 else "1f1b"
        for rank in range(p):
            assert [op[:3] for op in S.order(name, p, v, m, rank)] == schedule(p, v, m, rank)


@pytest.mark.parametrize("name", ["zb-h1", "zb-h2", "zb-v", "dualpipe", "dualpipev"])
@pytest.mark.parametrize("p,m", [(2, 8), (4, 8), (4, 12), (8, 16), (8, 30)])
def test_every_order_runs_every_op_once(name, p, m):
    for rank in range(p):
        ops = S.order(name, p, 2, m, rank)
        chunks = 1 if name in ("zb-h1", "zb-h2") else 2
        per_chunk = m // 2 if name == "dualpipe" else m
        for kind in "FBW":
            assert len([o for o in ops if o[0] == kind]) == (m if name == "dualpipe" else chunks * per_chunk) \
                or kind == "W"
        # every W follows its own B, and each instance is freed once
        seen_b = set()
        for kind, mb, chunk, _ in ops:
            if kind == "B":
                seen_b.add((mb, chunk))
            if kind == "W":
                assert (mb, chunk) in seen_b


# --- in flight -------------------------------------------------------------------------------------------

def test_in_flight_counts_match_the_papers():
    p, m = 8, 32
    assert [S.peak_in_flight("1f1b", p, 1, m, r) for r in range(p)] == [in_flight(p, 1, m, "first")] + \
        list(range(p - 1, 0, -1))
    # ZB-H1: every stage p (the paper's "same number of in-flight micro-batches on all stages", p·M_B)
    assert {S.peak_in_flight("zb-h1", p, 1, m, r) for r in range(p)} == {p}
    # ZB-H2: (2p − 1)·M_B on the first stage (Table 2)
    assert S.peak_in_flight("zb-h2", p, 1, m, 0) == 2 * p - 1
    # ZB-V: p·M_B = 2p chunks of half a stage, on every rank
    assert {S.peak_in_flight("zb-v", p, 2, m, r) for r in range(p)} == {2 * p}
    # DualPipe: PP + 1 chunk activations per device; DualPipeV: PP + 1 with PP = 2p stages (README)
    assert max(S.peak_in_flight("dualpipe", p, 1, m, r) for r in range(p)) == p + 1
    assert max(S.peak_in_flight("dualpipev", p, 2, m, r) for r in range(p)) == 2 * p + 1


# --- the bubble of each order, against the papers' formulas --------------------------------------------------

@pytest.mark.parametrize("p,m", [(4, 8), (8, 24), (8, 48), (16, 48)])
def test_simulated_bubbles_are_the_papers(p, m):
    one = S.simulate("1f1b", p, 1, m, F, B, W)["bubble"]
    assert one == pytest.approx((p - 1) * (F + B + W))              # Narayanan: (p − 1)(F + B + W)
    assert S.simulate("interleaved", p, 2, m, F, B, W)["bubble"] == pytest.approx((p - 1) * (F + B + W))  # chunk units
    assert S.simulate("zb-h1", p, 1, m, F, B, W)["bubble"] == pytest.approx((p - 1) * (F + B - W))
    assert S.simulate("zb-h2", p, 1, m, F, B, W)["bubble"] == pytest.approx(max(0, (p - 1) * (F + B - 2 * W)))
    assert S.simulate("zb-h2", p, 1, m, 1.0, 1.5, 0.5)["bubble"] == pytest.approx((p - 1) * (1.0 + 1.5 - 1.0))
    # at T_F = T_B = T_W: ZB-V none; DualPipe (PP/2 − 1)(F&B + B − 3W) with B the whole backward, F&B = F + B
    assert S.simulate("zb-v", p, 2, m, 1, 1, 1)["bubble"] == pytest.approx(0)
    assert S.simulate("dualpipe", p, 1, m, 1, 1, 1)["bubble"] == pytest.approx((p / 2 - 1) * (3 + 2 - 3))
    assert S.simulate("dualpipev", p, 2, 2 * p if m < 2 * p else m, 1, 1, 1)["bubble"] == \
        pytest.approx((2 * p / 2 - 1) * (3 + 2 - 3))


def test_bubble_in_seconds_does_not_grow_with_m():
    for name, v in (("zb-h1", 1), ("zb-h2", 1), ("zb-v", 2), ("dualpipe", 1), ("dualpipev", 2)):
        assert S.simulate(name, 8, v, 48, F, B, W)["bubble"] == pytest.approx(S.simulate(name, 8, v, 80, F, B, W)["bubble"])


def test_dualpipe_pairs_its_steady_state():
    # step 4 runs 2·(m/2 − p + hr + 1) ops as pairs, step 5 (p/2 − hr − 1); rank 0 (hr = 0) the fewest:
    # (m − 3p/2 + 1) of its m forwards-and-backwards' 2m ops
    p, m = 16, 120
    share = S.paired_share("dualpipe", p, 1, m)
    assert share == pytest.approx(2 * (m - 3 * p // 2 + 1) / (2 * m))
    assert S.paired_share("zb-h1", p, 1, m) == 0


# --- chunk placement and parameter copies ------------------------------------------------------------------

def test_placements():
    assert chunk_ranges(16, 4, 2, placement="v")[0] == (range(0, 2), range(14, 16))
    assert chunk_ranges(16, 4, 2, placement="v")[3] == (range(6, 8), range(8, 10))
    assert chunk_ranges(16, 4, 1, placement="dual")[1] == (range(4, 8), range(8, 12))


def test_dualpipe_holds_two_parameter_chunks(capsys):
    common = ["bill", "gpt-175b", "--tp", "8", "--pp", "8", "--dp", "16", "--global-batch", "1536", "--json"]
    assert main(common) == 0
    one = json.loads(capsys.readouterr().out)
    assert main(common + ["--schedule", "dualpipe"]) == 0
    two = json.loads(capsys.readouterr().out)
    # the first GPU holds stages 1 and p (12 + 12 layers, the embedding and the output layer): twice the even
    # split's first-order share (43.65 GB), and the two ends' embedding and output weights
    assert 2 * one["model_states_bytes"] < two["model_states_bytes"] < 2.05 * one["model_states_bytes"]
    assert two["model_states_bytes"] == 88_289_427_456


def test_zb_h1_steps_shorter_than_1f1b_on_gpt3(capsys):
    common = ["bill", "gpt-175b", "--tp", "8", "--pp", "8", "--dp", "16", "--global-batch", "1536", "--gpu", "a100",
              "--json"]
    steps = {}
    for name in ("1f1b", "zb-h1", "zb-h2", "zb-v"):
        assert main(common + ["--schedule", name]) == 0
        steps[name] = json.loads(capsys.readouterr().out)
    assert main(common) == 0
    plain = json.loads(capsys.readouterr().out)
    assert steps["1f1b"]["step_seconds"] == plain["step_seconds"]           # 1f1b is today's behaviour
    assert steps["zb-h1"]["step_seconds"] < steps["1f1b"]["step_seconds"]
    bubble = {k: v["time_breakdown"]["bubble"] for k, v in steps.items()}
    assert bubble["zb-h2"] < bubble["zb-h1"] < bubble["1f1b"]
    assert steps["zb-h1"]["time_model"]["schedule"] == "zb-h1"


def test_interleaved_is_todays(capsys):
    common = ["bill", "gpt-175b", "--tp", "8", "--pp", "8", "--dp", "16", "--global-batch", "1536", "--interleave",
              "2", "--json"]
    assert main(common) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(common + ["--schedule", "interleaved"]) == 0
    named = json.loads(capsys.readouterr().out)
    assert named["layout"].pop("schedule") == "interleaved" and plain["layout"].pop("schedule") == ""
    assert named == plain


# --- refusals --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout,words", [
    (Layout(tp=8, pp=8, dp=16, global_batch=128, schedule="dualpipe"), "at least 16 micro-batches"),
    (Layout(tp=8, pp=1, dp=16, schedule="zb-h1"), "is a pipeline schedule"),
    (Layout(tp=8, pp=8, dp=16, global_batch=1536, schedule="interleaved"), "--interleave"),
    (Layout(tp=8, pp=8, dp=16, global_batch=1536, schedule="1f1b", interleave=2), "--schedule interleaved"),
    (Layout(tp=8, pp=8, dp=16, global_batch=1536, schedule="zb-v", interleave=3), "drop --interleave"),
    (Layout(tp=8, pp=8, dp=16, global_batch=1552, schedule="dualpipe"), "must be even"),
    (Layout(tp=8, pp=8, dp=16, global_batch=1536, schedule="zb-h9"), "schedule must be one of"),
])
def test_refusals(layout, words):
    with pytest.raises(ConfigError, match=words.replace("-", r"\-")):
        layout.validate(presets()["gpt-175b"])


def test_cli_refuses_an_unknown_schedule(capsys):
    assert main(["bill", "gpt-175b", "--tp", "8", "--pp", "8", "--schedule", "gpipe"]) != 0
    assert "invalid choice" in capsys.readouterr().err


def test_timeline_prints_the_order(capsys):
    assert main(["timeline", "gpt-175b", "--tp", "8", "--pp", "8", "--dp", "16", "--global-batch", "256",
                 "--schedule", "zb-h1", "--stage", "last", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    order = data["schedule_order"]
    assert order["rank"] == 7 and order["ops"][:4] == ["F0", "B0", "F1", "B1"] and order["ops"][-1] == "W15"
    assert order["most_in_flight"] == 8


@pytest.mark.parametrize("name", ["zb-h2", "zb-v", "dualpipe"])
def test_the_verdict_is_the_timelines_peak(name):
    # the bill's verdict and the timeline walked on every stage find the same peak under each schedule's order
    from symbolic.bill.derive import make_bill
    from tests.test_verdict import timeline_peak

    model = presets()["gpt-7b"]
    layout = Layout(tp=2, pp=4, global_batch=16, schedule=name).validate(model)
    assert int(make_bill(model, layout).totals["total_bytes"]) == timeline_peak(model, layout)


def test_zb_v_takes_any_micro_batch_count():
    # PyTorch's ScheduleZBVZeroBubble pads to 2p − 1 micro-batches and drops the padded ones: no lower bound
    Layout(tp=8, pp=8, dp=16, global_batch=64, schedule="zb-v").validate(presets()["gpt-175b"])
    assert [S.peak_in_flight("zb-v", 4, 2, 3, r) for r in range(4)] == [4, 5, 6, 6]


def _step(model, **layout):
    from symbolic.bill.timing import step_time
    from symbolic.ledgers.hardware import load

    built = presets()[model]
    return step_time(built, Layout(**layout).validate(built), load("h100"))


def test_the_bills_zb_h1_bubble_is_the_papers_form_in_its_own_times():
    step = _step("gpt-175b", tp=8, pp=8, dp=16, global_batch=1536, schedule="zb-h1")
    f = step.factors
    F, B, W = f["chunk_forward_seconds"], f["chunk_input_gradient_seconds"], f["chunk_weight_gradient_seconds"]
    assert float(step.breakdown["bubble"]) == pytest.approx(7 * (F + B - W))
    one = _step("gpt-175b", tp=8, pp=8, dp=16, global_batch=1536)
    assert float(one.breakdown["bubble"]) == pytest.approx(7 * (F + B + W))   # 1F1B's (p − 1)/m × pipelined


def test_dualpipe_hides_the_paired_all_to_all():
    common = dict(tp=1, pp=4, dp=8, ep=4, global_batch=64)
    plain = _step("qwen3-30b-a3b", **common)
    dual = _step("qwen3-30b-a3b", schedule="dualpipe", **common)
    share = dual.factors["paired_share"]
    assert share == pytest.approx(S.paired_share("dualpipe", 4, 1, 8)) and 0 < share < 1   # m = 64 / 8
    # the paired ops' all-to-all hides under the other micro-batch's computation (compute ≫ all-to-all here)
    assert float(dual.breakdown["ep_exposed"]) == pytest.approx(float(plain.breakdown["ep_exposed"]) * (1 - share))
    assert float(dual.breakdown["compute"]) == pytest.approx(float(plain.breakdown["compute"]))


def test_torchtitans_v_schedules_are_read():
    from symbolic.layout.launch import read_launch

    config = {"parallelism": {"pipeline_parallel_degree": 4}, "activation_checkpoint": {"mode": "none"}}
    for name, ours in (("ZBVZeroBubble", "zb-v"), ("DualPipeV", "dualpipev")):
        config["parallelism"]["pipeline_parallel_schedule"] = name
        layout = read_launch("torchtitan", config).layout()
        assert (layout.schedule, layout.interleave) == (ours, 2)
    config["parallelism"]["pipeline_parallel_schedule"] = "InterleavedZeroBubble"
    with pytest.raises(ConfigError, match="ZBVZeroBubble, DualPipeV"):
        read_launch("torchtitan", config)


def test_timeline_order_of_a_rank_by_number(capsys):
    # DualPipe's middle rank (hr = p/2 − 1) runs its first F0/B1 apart (DualPipe.step: "We don't overlap these two")
    assert main(["timeline", "gpt-175b", "--tp", "8", "--pp", "8", "--dp", "16", "--global-batch", "256",
                 "--schedule", "dualpipe", "--stage", "3", "--json"]) == 0
    order = json.loads(capsys.readouterr().out)["schedule_order"]
    assert order["rank"] == 3
    ops = order["ops"]
    assert ops[ops.index("F4.0") + 1] == "B8.1" and ops[ops.index("B8.1") + 1] == "F12.1&"


def test_w_pending_instances_at_the_peak():
    # ZB-H1's last stage holds p instances at its fullest, p − 1 of them waiting for W; the first stage runs each
    # W right after its B; ZB-V's and DualPipe's fullest moments come before any W is deferred
    p, m = 8, 48
    assert [S.w_pending_at_peak("zb-h1", p, 1, m, r) for r in (0, p - 1)] == [0, p - 1]
    assert [S.w_pending_at_peak("zb-h2", p, 1, m, r) for r in (0, p - 1)] == [0, 2 * p - 2]
    assert {S.w_pending_at_peak(n, p, v, m, r) for n, v in (("zb-v", 2), ("dualpipe", 1), ("dualpipev", 2))
            for r in range(p)} == {0}
