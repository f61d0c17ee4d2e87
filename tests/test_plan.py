"""The planner: every valid layout, evaluated at once, agreeing with the bill."""
import itertools
import json
import random
from dataclasses import replace

import numpy as np
import pytest
from sympy import Rational

from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.commands._options import parse_memory
from symbolic.layout.layout import Layout
from symbolic.models.config import ConfigError
from symbolic.models.builtin import preset
from symbolic.search.plan import Group, divisors, plan, sweep

GB = 10**9
TOTALS = ("params", "model_states_bytes", "activation_bytes", "total_bytes", "flops_per_iteration",
          "model_flops_per_iteration", "flops_per_gpu_per_iteration")


@pytest.fixture(scope="module")
def plan_175b():
    """Korthikanti Table 3's GPT-3 175B on 64 GPUs at s = 2048, one sequence per GPU per iteration."""
    return plan(preset("gpt-175b"), 64, 80 * GB, global_batch=64)


def _key(layout):
    return (layout.tp, layout.pp, layout.dp, layout.micro_batch, layout.interleave, layout.sp, layout.recompute,
            layout.zero)


def test_table3_layout_fits_with_sp_and_selective_recompute(plan_175b):
    fitting = {_key(item.layout) for item in plan_175b.ranked(0)}
    # t = 8, p = 8, b = 1 with SP + selective recompute, 1F1B and interleaved (v = 3, as seed 001's table).
    assert (8, 8, 1, 1, 1, True, "selective", 0) in fitting
    assert (8, 8, 1, 1, 3, True, "selective", 0) in fitting
    # Korthikanti §6.1: without SP and selective recompute together the interleaved layout does not fit 80 GB.
    assert (8, 8, 1, 1, 3, True, "none", 0) not in fitting
    assert (8, 8, 1, 1, 3, False, "selective", 0) not in fitting
    all_keys = {_key(plan_175b.layout_at(i)) for i in range(plan_175b.evaluated)}
    assert (8, 8, 1, 1, 3, True, "none", 0) in all_keys  # evaluated, just not fitting


@pytest.mark.parametrize("name, gpus, pp", [("gpt-22b", 8, 1), ("gpt-175b", 64, 8), ("gpt-530b", 280, 35),
                                            ("gpt-1t", 512, 64)])
def test_every_table3_model_fits_its_paper_layout_only_with_sp_and_selective(name, gpus, pp):
    """Korthikanti Table 3: t = 8, the paper's p, b = 1 on its GPU count; §6.1: for the two largest,
    neither SP alone nor selective recompute alone fits 80 GB."""
    model = preset(name)
    result = plan(model, gpus, 80 * GB, global_batch=gpus, fixed={"tp": 8, "pp": pp, "micro_batch": 1,
                                                                  "interleave": 1})
    fitting = {(x.layout.sp, x.layout.recompute): x for x in result.ranked(0)}
    paper = fitting[(True, "selective")]
    assert paper.totals["total_bytes"] == make_bill(model, paper.layout).totals["total_bytes"] <= 80 * GB
    if name in ("gpt-530b", "gpt-1t"):
        assert (True, "none") not in fitting and (False, "selective") not in fitting


def test_listed_layouts_agree_exactly_with_the_bill(plan_175b):
    listed = plan_175b.ranked(0)
    sample = random.Random(6).sample(listed, 25) + listed[:3]
    for item in sample:
        bill = make_bill(plan_175b.model, item.layout, gpu_memory=80 * GB)
        for key in TOTALS:
            assert item.totals[key] == bill.totals[key], (item.layout, key)
        assert item.headroom_bytes == bill.totals["headroom_bytes"]
        assert item.fits and bill.totals["headroom_bytes"] >= 0


def test_vectorised_floats_match_the_bill_for_every_layout_sampled(plan_175b):
    model = plan_175b.model
    indices = random.Random(7).sample(range(plan_175b.evaluated), 40)
    for i in indices:
        bill = make_bill(model, plan_175b.layout_at(i))
        for key in TOTALS[:6]:
            assert plan_175b.table[key][i] == pytest.approx(float(bill.totals[key]), rel=1e-12)
        assert bool(plan_175b.table["fits"][i]) == (bill.totals["total_bytes"] <= 80 * GB)


def test_every_layout_is_valid_and_all_valid_layouts_are_swept():
    """Every swept layout passes ``Layout.validate``, and every candidate it accepts (t, p, c dividing 16,
    b ≤ 32, v ≤ L/p = 24, SP, recompute, ZeRO; less the plan's stated framework rules) is swept.

    The candidates whose sizes alone are refused — b·d not dividing B = 32, p·v not dividing L = 48, v > 1
    without a pipeline: ``Layout.validate``'s size rules, which read b, d, p, v and nothing of SP, recompute
    or ZeRO — are checked refused once per (t, p, c, b, v), their flags cycling through the 24 combinations;
    every other candidate goes through ``Layout.validate`` with every flag (43,040 calls in all
    rather than 626,688, issue 24)."""
    model = preset("gpt-22b")  # 48 layers, 64 heads
    result = plan(model, 16, 80 * GB, global_batch=32)
    swept = set()
    for i in range(result.evaluated):
        layout = result.layout_at(i).validate(model)
        assert layout.tp * layout.pp * layout.dp * layout.cp == 16
        swept.add(_key(layout) + (layout.cp,))
    flags = list(itertools.product((False, True), ("none", "selective", "full"), range(4)))
    expected, refused = set(), 0
    for tp, pp, cp in itertools.product(divisors(16), repeat=3):
        if 16 % (tp * pp * cp) or tp > 8:
            continue
        dp = 16 // (tp * pp * cp)
        for k, (mb, v) in enumerate(itertools.product(range(1, 33), range(1, 25))):
            if 32 % (mb * dp) or 48 % (pp * v) or (v > 1 and pp == 1):  # refused by its sizes alone
                sp, rc, zero = flags[k % len(flags)]
                with pytest.raises(ConfigError):
                    Layout(micro_batch=mb, tp=tp, pp=pp, dp=dp, sp=sp, recompute=rc, zero=zero, interleave=v,
                           global_batch=32, cp=cp).validate(model)
                refused += 1
                continue
            for sp, rc, zero in flags:
                layout = Layout(micro_batch=mb, tp=tp, pp=pp, dp=dp, sp=sp, recompute=rc, zero=zero, interleave=v,
                                global_batch=32, cp=cp)
                try:
                    layout.validate(model)
                except ConfigError:
                    continue
                m = 32 // (mb * dp)
                if (sp and tp == 1) or (zero and dp * cp == 1) or (zero >= 2 and pp > 1) or (v > 1 and m % pp):
                    continue  # the plan's stated framework rules
                expected.add(_key(layout) + (cp,))
    assert swept == expected
    assert refused > 0 and {key[-1] for key in swept} == {1, 2, 4, 8, 16}  # context parallelism is swept


def test_ranking_and_time_model(plan_175b):
    """Ranked by the step-time model of symbolic.ledgers.time (its own tests: tests/test_time.py);
    the bubble column is still (p − 1)/(v m)."""
    per_sequence = plan_175b.table["seconds_per_sequence"][plan_175b.order]
    # ranked at 12 significant digits (float noise between twins ties, plan._significant)
    assert np.all(np.diff(per_sequence) >= -1e-12 * per_sequence[1:])
    item = next(x for x in plan_175b.ranked(0) if _key(x.layout) == (8, 8, 1, 1, 1, True, "selective", 0))
    bubble = Rational(8 - 1, 64)  # 1F1B: (p - 1)/m, m = 64 micro-batches per pipeline
    assert item.bubble == pytest.approx(float(bubble))
    assert item.step_seconds == pytest.approx(sum(item.time_breakdown.values()), rel=1e-12)
    assert item.time_breakdown["bubble"] > 0 and item.time_breakdown["tp_exposed"] > 0
    interleaved = next(x for x in plan_175b.ranked(0) if _key(x.layout) == (8, 8, 1, 1, 3, True, "selective", 0))
    assert interleaved.bubble == pytest.approx(7 / (3 * 64))  # (p - 1)/(v m)
    assert interleaved.time_breakdown["bubble"] < item.time_breakdown["bubble"]
    assert plan_175b.hardware.name == "A100-SXM4-80GB" and plan_175b.hardware.peak_bf16_flops == 312e12


def test_binding_names_memory_when_recompute_is_forced(plan_175b):
    item = next(x for x in plan_175b.ranked(0) if _key(x.layout) == (8, 8, 1, 1, 3, True, "selective", 0))
    assert item.binding.startswith("memory: no recompute would need")


def test_fixed_choices_and_margin():
    model = preset("gpt-175b")
    result = plan(model, 64, 80 * GB, global_batch=64, fixed={"tp": 8, "pp": 8, "sp": True}, margin=30 * GB)
    assert result.evaluated > 0
    assert set(result.table["tp"]) == {8} and set(result.table["pp"]) == {8} and set(result.table["sp"]) == {1}
    for item in result.ranked(0):
        assert item.totals["total_bytes"] <= 50 * GB
    unfit = np.flatnonzero(~result.table["fits"])
    assert np.all(result.table["total_bytes"][unfit] > 50 * GB)


def test_nothing_fits_reports_the_closest_layout():
    model = preset("gpt-175b")
    result = plan(model, 8, 80 * GB)
    assert result.evaluated > 0 and len(result.order) == 0 and result.ranked() == []
    closest = result.closest()
    bill = make_bill(model, closest.layout, gpu_memory=80 * GB)
    assert closest.totals["total_bytes"] == bill.totals["total_bytes"] > 80 * GB
    assert closest.headroom_bytes == bill.totals["headroom_bytes"] < 0
    assert float(closest.totals["total_bytes"]) == pytest.approx(result.table["total_bytes"].min(), rel=1e-12)
    assert closest.binding.startswith("memory: over by")


def test_no_valid_layout_is_a_config_error():
    # without a pipeline: 7 divides neither the heads (t) nor the global batch (d); p = 7 runs, unevenly
    # (tests/test_plan_schedules.py)
    with pytest.raises(ConfigError, match="no valid layout of gpt-175b on 7 GPUs"):
        plan(preset("gpt-175b"), 7, 80 * GB, global_batch=64, fixed={"pp": 1})
    with pytest.raises(ConfigError, match="margin"):
        plan(preset("gpt-175b"), 64, 80 * GB, margin=80 * GB)


def test_sweep_evaluates_arrays_of_models():
    """The benchmark's entry point: model dimensions as arrays, one group."""
    values = {"s": np.array([2048, 4096]), "b": np.array([1, 4]), "h": np.array([12288, 4096]),
              "a": np.array([96, 32]), "L": np.array([96, 32]), "V": 51200, "t": np.array([8, 8]),
              "p": np.array([8, 1]), "d": 1, "f": 0, "v": 1}
    group = Group(sp=True, recompute="none", zero=0, schedule="1f1b")
    out = sweep(group, values, micro_batches=np.array([1, 1]))
    bill = make_bill(preset("gpt-175b"), Layout(tp=8, pp=8, sp=True))
    assert out["total_bytes"][0] == pytest.approx(float(bill.totals["total_bytes"]), rel=1e-12)
    assert out["params"][1] == float(make_bill(preset("gpt-7b"), Layout(tp=8, sp=True)).totals["params"])


@pytest.mark.parametrize("text, value", [("80GB", 80 * GB), ("80 GiB", 80 * 2**30), ("80 GB", 80 * GB),
                                         ("1.5TB", 1_500 * GB)])
def test_memory_with_units_is_accepted(text, value):
    assert parse_memory(text) == value


@pytest.mark.parametrize("text", ["80", "8e10", "80 gigs", "", "-80GB"])
def test_memory_without_a_unit_is_refused(text):
    with pytest.raises(ConfigError, match="give a number with a unit"):
        parse_memory(text)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_plan_json_lists_layouts_with_ledger_totals(capsys):
    code, out, _ = run(capsys, "plan", "gpt-175b", "--gpus", "64", "--gpu-memory", "80GB", "--global-batch", "64",
                       "--tp", "8", "--pp", "8", "--sp", "--recompute", "selective", "--top", "3", "--json")
    data = json.loads(out)
    assert code == 0 and data["fitting"] >= 1 and len(data["layouts"]) <= 3
    first = data["layouts"][0]
    for key in ("tp", "pp", "dp", "micro_batch", "zero", "recompute", "sp", "interleave", "params",
                "model_states_bytes", "activation_bytes", "total_bytes", "headroom_bytes", "flops_per_iteration",
                "step_seconds", "binding"):
        assert key in first
    layout = Layout(micro_batch=first["micro_batch"], seq=first["seq"], tp=first["tp"], pp=first["pp"],
                    dp=first["dp"], sp=first["sp"], recompute=first["recompute"], zero=first["zero"],
                    interleave=first["interleave"], global_batch=64)
    bill = make_bill(preset("gpt-175b"), layout)
    assert first["total_bytes"] == bill.totals["total_bytes"]
    assert first["flops_per_iteration"] == bill.totals["flops_per_iteration"]
    assert data["hardware"]["name"] == "A100-SXM4-80GB" and data["hardware"]["peak_flops"] == 312e12
    assert first["step_seconds"] == pytest.approx(sum(first["time_breakdown"].values()), rel=1e-12)


def test_cli_plan_text_states_its_assumptions(capsys):
    code, out, _ = run(capsys, "plan", "gpt-175b", "--gpus", "64", "--gpu-memory", "80 GiB", "--global-batch", "64",
                       "--top", "5", "--margin", "10%")
    assert code == 0
    assert "A100-SXM4-80GB: 312 TFLOP/s bf16 dense" in out and "margin 8.59 GB" in out
    assert "(p−1)/(v·m)" in out and ("binding" in out or "what limits each layout" in out)


def test_cli_plan_nothing_fits_exits_1(capsys):
    code, out, _ = run(capsys, "plan", "gpt-175b", "--gpus", "8", "--gpu-memory", "80GB")
    assert code == 1 and "NO LAYOUT FITS" in out and "misses by" in out


@pytest.mark.parametrize("argv, message", [
    (["--gpus", "64", "--gpu-memory", "80"], "give a number with a unit"),
    (["--gpus", "64", "--gpu-memory", "8e10"], "give a number with a unit"),
    (["--gpus", "7", "--gpu-memory", "80GB", "--global-batch", "64", "--pp", "1"], "no valid layout"),
    (["--gpus", "64", "--gpu-memory", "80GB", "--margin", "150%"], "--margin"),
    (["--gpus", "64", "--gpu-memory", "80GB", "--optimizer", "adamw"], "--optimizer"),  # a listed choice now (issue 13)
    (["--gpus", "64", "--gpu-memory", "80GB", "--top", "-1"], "--top"),
])
def test_cli_plan_bad_input_is_one_line(capsys, argv, message):
    code, out, err = run(capsys, "plan", "gpt-175b", *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv, option", [
    (["--gpus", "0", "--gpu-memory", "80GB"], "--gpus"),
    (["--gpus", "64", "--gpu-memory", "80GB", "--overlap", "some"], "--overlap"),
    (["--gpus", "64", "--gpu-memory", "80GB", "--zero", "4"], "--zero"),
    (["--gpus", "64"], "--gpu-memory"),
])
def test_cli_plan_out_of_range_options_are_usage_errors(capsys, argv, option):
    code = main(["plan", "gpt-175b", *argv])  # the CLI's error boundary returns argparse's exit status
    _, err = capsys.readouterr()
    assert code == 2 and option in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name, gpus", [("llama-2-7b", 8), ("mixtral-8x7b", 32)])
def test_native_models_plan_with_their_own_inventories(name, gpus):
    """LLaMA (GQA, SwiGLU, RMSNorm, fused attention) and MoE (N_total for the states, N_active for the
    FLOPs): every layout listed, and a sample of all evaluated, agree exactly with make_bill."""
    model = preset(name)
    result = plan(model, gpus, 80 * GB, seq=4096, global_batch=32)
    listed = result.ranked(200)  # each listed layout is totalled exactly; a sample of them is billed
    assert listed and result.evaluated > len(listed)
    rng = random.Random(8)
    for item in rng.sample(listed, min(8, len(listed))) + listed[:3]:
        bill = make_bill(model, item.layout, gpu_memory=80 * GB)
        for key in TOTALS:
            assert item.totals[key] == bill.totals[key], (item.layout, key)
        assert item.headroom_bytes == bill.totals["headroom_bytes"] >= 0
    for i in rng.sample(range(result.evaluated), 10):
        bill = make_bill(model, result.layout_at(i))
        for key in ("params", "total_bytes", "flops_per_iteration", "model_flops_per_iteration"):
            assert result.table[key][i] == pytest.approx(float(bill.totals[key]), rel=1e-12)
    assert all(item.layout.tp <= model.values()["g"] for item in listed)  # whole K/V heads per rank


def test_cli_plan_llama(capsys):
    assert main(["plan", "llama-2-7b", "--gpus", "8", "--gpu-memory", "80GB", "--seq", "4096", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    first = data["layouts"][0] if "layouts" in data else data["ranked"][0]
    bill = make_bill(preset("llama-2-7b"), Layout(micro_batch=first["micro_batch"], seq=4096, tp=first["tp"],
                                                   pp=first["pp"], dp=first["dp"], sp=first["sp"],
                                                   recompute=first["recompute"], zero=first["zero"],
                                                   interleave=first["interleave"]))
    assert first["total_bytes"] == bill.totals["total_bytes"] and first["params"] == 6_738_415_616


def test_a_learned_table_shorter_than_seq_is_the_bills_one_line_everywhere(tmp_path, capsys):
    """Issue 10: `plan gpt2 --seq 4096` said "no valid layout"; every command now gives the bill's
    refusal (the field, the table's rows, the fix), exit 2 — and solve --max seq names the table."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 100,
                                "n_positions": 256}))
    refusal = "seq (4096) exceeds the learned position table of "  # the field and its value
    lines = []
    for argv in (["bill", str(path), "--seq", "4096"],
                 ["plan", str(path), "--gpus", "8", "--seq", "4096", "--gpu-memory", "80GB"],
                 ["solve", str(path), "--max", "micro-batch", "--seq", "4096", "--gpu-memory", "80GB"],
                 ["timeline", str(path), "--seq", "4096"]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (argv, err)
        assert refusal in err and "(256 rows, n_positions)" in err and "choose --seq 256 or less" in err, err
        lines.append(err.strip().split("error: ", 1)[1])
    assert len(set(lines)) == 1  # the same words from every command
    with pytest.raises(ConfigError, match=r"seq \(4096\) exceeds the learned position table"):
        plan(replace(preset("gpt-7b"), position_table=2048), 8, 80 * GB, seq=4096)
    code, out, _ = run(capsys, "solve", str(path), "--max", "seq", "--gpu-memory", "80GB")
    assert code == 0 and "largest seq: s = 256 (the largest valid value: the learned position table has 256 rows" in out


def test_comm_bytes_is_the_bills_communication_buffers_on_every_grid():
    """The vectorised buffers (an expression of the group sizes, no sort) equal
    ``CommSettings.items`` layout by layout: dense grids, expert grids (e, e_t, and the
    expert-data-parallel group edp = t·d·c/(e·e_t) equal to d or not), one call for all of them."""
    from symbolic.ledgers.transients import CommSettings
    from symbolic.search.plan import comm_bytes

    rows = []
    for t, d, p, c, e, e_t in itertools.product((1, 2, 4, 8), (1, 2, 4, 16), (1, 2, 8), (1, 2, 4), (1, 2, 4, 8),
                                                (1, 2, 4)):
        if (t * d * c) % (e * e_t):
            continue  # Megatron-Core's expert grid folds into t·d·c
        rows.append((t, d, p, c, e, e_t))
    t, d, p, c, e, e_t = (np.array(column) for column in zip(*rows))
    for settings in (CommSettings(), CommSettings(nccl_buffsize=2**20, channels=3, bucket_bytes=0)):
        expected = [sum(size for _, size in settings.items(Layout(tp=t_, dp=d_, pp=p_, cp=c_, ep=e_,
                                                                  etp=0 if et_ == t_ else et_)))
                    for t_, d_, p_, c_, e_, et_ in rows]
        assert comm_bytes(t, d, p, c, e, e_t, settings).tolist() == expected
        assert comm_bytes(*(x.astype(float) for x in (t, d, p, c, e, e_t)), settings=settings).tolist() == expected
    assert len(rows) > 500 and len(set(expected)) > 5  # the grid reaches every communicator count
    # Broadcasting as the sweep calls it: scalars beside arrays, e_t defaulting to t.
    assert comm_bytes(np.array([1, 8]), 4, 1, 1).tolist() == [64 * 2**20 + 25 * 2**20, 2 * 64 * 2**20 + 25 * 2**20]


def test_a_plan_without_a_loss_prices_each_layout_with_its_bills_default():
    """An HF model's usual loss is transformers' eager one on one rank; under TP the bill's default is
    vocabulary-parallel (``layout.default_loss``: eager would gather the whole vocabulary). A plan given no
    loss prices each layout so — its swept totals equal the exact bill of the same layout, t = 1 and t > 1."""
    import numpy as np

    import symbolic
    from symbolic.search.plan import exact_totals

    result = symbolic.plan("llama-3-8b", gpus=8, gpu="h100", top=1).engine
    table = result.table
    assert result.loss == "eager" and result.loss_under_tp == "vocab-parallel"
    for tp in (1, 2):
        i = int(np.flatnonzero(table["tp"] == tp)[0])
        layout = result.layout_at(i)
        assert layout.loss == ("eager" if tp == 1 else "vocab-parallel")
        exact = exact_totals(result.model, layout, None)["total_bytes"]
        assert abs(table["total_bytes"][i] - exact) <= 1e-9 * exact
