"""Issue 21: the --seq default every command states, and the memory levers (LoRA, QLoRA, offload, activation
offload) in plan, solve and timeline with the bill's numbers."""
import json

import pytest

import symbolic
from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.layout.layout import Layout
from symbolic.models.builtin import preset
from symbolic.models.config import ConfigError
from symbolic.search.plan import exact_totals, plan
from symbolic.search.solve import solve_limit

GB = 10**9


def run_json(capsys, *argv):
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def run_text(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr().out


# --- the --seq default ------------------------------------------------------------------------------

def test_an_hf_config_is_billed_at_4096_not_its_position_table(capsys):
    """Llama-3.1-70B's table allows 131,072 positions; nobody trains there by default: s = 4096, said so."""
    model = preset("llama-3.1-70b")
    assert (model.seq, model.max_positions) == (4096, 131072)
    code, data = run_json(capsys, "bill", "llama-3.1-70b", "--gpu", "h100")
    assert data["values"]["s"] == 4096
    assert data["layout"]["seq_from"] == "default: --seq not given; the position table allows 131,072"
    assert data["model_config"]["max_positions"] == 131072
    _, out = run_text(capsys, "bill", "llama-3.1-70b", "--gpu", "h100", "--brief")
    assert "s=4096 (default: --seq not given; the position table allows 131,072)" in " ".join(out.split())


def test_a_short_table_caps_the_default_and_a_given_seq_is_taken_as_given(capsys):
    """A table shorter than 4096 is the default (GPT-2's 1024 rows); --seq given: no note, its value."""
    from symbolic.models.hf import from_hf_dict
    gpt2 = from_hf_dict({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 100,
                         "n_positions": 1024}, "tiny")
    assert (gpt2.seq, gpt2.max_positions, gpt2.position_table) == (1024, 1024, 1024)
    _, data = run_json(capsys, "bill", "llama-3-8b", "--seq", "8192")
    assert data["values"]["s"] == 8192 and "seq_from" not in data["layout"]
    _, data = run_json(capsys, "bill", "mixtral-8x7b", "--ep", "8", "--dp", "8")
    assert data["values"]["s"] == 4096  # was 32,768: activations 382.5 GB


def test_the_papers_models_keep_their_training_length(capsys):
    """Korthikanti's GPT-175B: s = 2048 as before, the line saying it is the model's."""
    assert preset("gpt-175b").seq == 2048 and preset("gpt-175b").max_positions == 0
    _, data = run_json(capsys, "bill", "gpt-175b", "--tp", "8", "--pp", "8", "--sp", "--recompute", "selective")
    assert data["values"]["s"] == 2048 and data["layout"]["seq_from"] == "the model's training length"
    assert "max_positions" not in data["model_config"]


def test_plan_solve_timeline_and_the_api_state_the_same_default(capsys):
    _, data = run_json(capsys, "plan", "llama-3.1-70b", "--gpus", "8", "--gpu", "h100", "--tp", "8", "--pp", "1",
                       "--recompute", "full", "--micro-batch", "1", "--zero", "1")
    assert data["seq"] == 4096 and data["seq_from"].startswith("default: --seq not given")
    _, data = run_json(capsys, "solve", "llama-3-8b", "--gpu", "h100", "--max", "micro-batch")
    assert data["layout"]["seq"] == 4096 and data["layout"]["seq_from"].endswith("allows 8,192")
    _, data = run_json(capsys, "timeline", "llama-3-8b", "--gpu", "h100")
    assert data["layout"]["seq"] == 4096 and "seq_from" in data["layout"]
    assert symbolic.bill("llama-3.1-70b", gpu="h100").to_dict()["values"]["s"] == 4096


# --- the levers in plan, solve and timeline -------------------------------------------------------------

LEVERS = [dict(lora=16), dict(lora=16, base_dtype="nf4"), dict(lora=8, lora_targets="attention", base_dtype="int8"),
          dict(offload="optimizer"), dict(lora=16, activation_offload=True)]


@pytest.mark.parametrize("levers", LEVERS, ids=lambda x: ",".join(f"{k}={v}" for k, v in x.items()))
def test_plan_with_a_lever_totals_the_bill(levers):
    """Every layout a plan shows, and its float sweep, equal ``make_bill`` at that layout, lever included."""
    model = preset("llama-3-8b")
    result = plan(model, 8, 80 * GB, seq=2048, fixed={"tp": 2, "recompute": "none", "micro_batch": 2},
                  levers=levers)
    shown = result.ranked(6)
    assert shown
    for row in shown:
        assert all(getattr(row.layout, k) == v for k, v in levers.items())
        billed = make_bill(model, row.layout).totals
        assert row.totals["total_bytes"] == billed["total_bytes"]
        assert row.totals["model_states_bytes"] == billed["model_states_bytes"]
        assert row.totals["activation_bytes"] == billed["activation_bytes"]
        i = next(i for i in range(result.evaluated) if result.layout_at(i) == row.layout)
        assert result.table["total_bytes"][i] == pytest.approx(float(billed["total_bytes"]), rel=1e-12)


def test_plan_lora_cli_matches_the_bill_and_is_faster_than_full_training(capsys):
    """``plan llama-3-8b --gpus 8 --gpu h100 --lora 16`` runs; its best layout's total is the bill's; LoRA's
    step is below full fine-tuning's at that layout."""
    fixed = ["--tp", "1", "--pp", "1", "--recompute", "none", "--zero", "1"]
    code, data = run_json(capsys, "plan", "llama-3-8b", "--gpus", "8", "--gpu", "h100", "--lora", "16", *fixed)
    assert code == 0
    best = data["layouts"][0]
    assert best["lora"] == 16
    layout = Layout(tp=best["tp"], pp=best["pp"], dp=best["dp"], cp=best["cp"], micro_batch=best["micro_batch"],
                    zero=best["zero"], recompute=best["recompute"], sp=best["sp"], lora=16)
    assert best["total_bytes"] == make_bill(preset("llama-3-8b"), layout).totals["total_bytes"]
    _, text = run_text(capsys, "plan", "llama-3-8b", "--gpus", "8", "--gpu", "h100", "--lora", "16", *fixed,
                       "--brief")
    assert "LoRA r=16" in text
    full = plan(preset("llama-3-8b"), 8, 80 * GB, fixed={"tp": 1, "pp": 1, "recompute": "none", "zero": 1,
                                                         "micro_batch": best["micro_batch"], "cp": best["cp"]})
    assert best["step_seconds"] < full.ranked(1)[0].step_seconds
    api = symbolic.plan("llama-3-8b", gpus=8, gpu="h100", lora=16, tp=1, pp=1, zero=1, recompute="none", top=1)
    assert api.best == best


def test_solve_qlora_max_seq_is_checked_by_the_bill(capsys):
    """``solve llama-3-8b --gpu h100 --lora 16 --base-dtype nf4 --max seq``: the answer fits by the bill, the
    next s does not."""
    code, data = run_json(capsys, "solve", "llama-3-8b", "--gpu", "h100", "--lora", "16", "--base-dtype", "nf4",
                          "--max", "seq")
    assert code == 0 and data["seq"] == 10144 and data["layout"]["base_dtype"] == "nf4"
    model, usable = preset("llama-3-8b"), data["usable_bytes"]
    at = make_bill(model, Layout(seq=10144, lora=16, base_dtype="nf4")).totals["total_bytes"]
    after = make_bill(model, Layout(seq=10145, lora=16, base_dtype="nf4")).totals["total_bytes"]
    assert at == data["check"]["total_bytes"] and at <= usable < after
    api = symbolic.solve("llama-3-8b", max="seq", lora=16, base_dtype="nf4", gpu="h100")
    assert api.answer == 10144
    assert data["max_positions"] == 8192  # memory allows 10,144; the answer says the table does not
    assert "s = 10,144 is beyond the config's max_position_embeddings (8,192)" in "\n".join(api.summary(200))


@pytest.mark.parametrize("levers", LEVERS + [dict(offload="params", dp=8, zero=3)],
                         ids=lambda x: ",".join(f"{k}={v}" for k, v in x.items()))
def test_the_timeline_peak_is_the_bill_verdict_with_a_lever(levers):
    layout = dict(seq=2048, **levers)
    if levers.get("offload") == "optimizer":
        layout.update(dp=8, zero=1)
    timeline = symbolic.timeline("llama-3-8b", gpu="h100", **layout)
    billed = make_bill(preset("llama-3-8b"), Layout(**layout)).totals["total_bytes"]
    assert timeline.peak_bytes == billed


def test_the_levers_rules_are_the_bills():
    """One rule set: a quantised base without LoRA, parameter offload with tp > 1, refused by plan and solve
    in the bill's words."""
    model = preset("llama-3-8b")
    with pytest.raises(ConfigError, match="--lora 16"):
        plan(model, 8, 80 * GB, levers={"base_dtype": "nf4"})
    with pytest.raises(ConfigError, match="--lora 16"):
        solve_limit(model, Layout(base_dtype="nf4"), "seq", 80 * GB)
    result = plan(model, 8, 80 * GB, seq=2048, fixed={"recompute": "none", "micro_batch": 1},
                  levers={"offload": "params"})
    assert {result.layout_at(i).tp for i in range(result.evaluated)} == {1}
    assert {result.layout_at(i).pp for i in range(result.evaluated)} == {1}
    with pytest.raises(ConfigError, match="offload params with tp 2"):
        solve_limit(model, Layout(offload="params", tp=2), "micro_batch", 80 * GB)


# --- one breakdown: the text, the bar's legend, the notebook bar and --json at the verdict's instant -------

BREAKDOWN_CASES = [
    # the optimizer step (Korthikanti's GPT-3: activations gone, the fp32 temporaries in)
    ("gpt-175b", ["--tp", "8", "--pp", "8", "--sp", "--recompute", "selective"], "optimizer step"),
    # a backward instant (seed 001's 7B, b = 4)
    ("gpt-7b", ["--tp", "8", "--sp", "--micro-batch", "4", "--params", "7B"], "backward, last layer (attention half)"),
    # the loss (LoRA on Llama-3-8B: the output side alive)
    ("llama-3-8b", ["--seq", "2048", "--lora", "16"], "loss"),
]


def _gb_parts(text: str) -> list[tuple[str, str]]:
    """(name, '12.34') pairs of ``name 12.34 GB`` joined by ' + ' or two spaces."""
    import re
    return re.findall(r"([a-z][a-z ]*?) ([\d,]+\.\d\d) GB", text)


@pytest.mark.parametrize("model,flags,phase", BREAKDOWN_CASES, ids=[c[2] for c in BREAKDOWN_CASES])
def test_one_breakdown_in_every_output(capsys, monkeypatch, model, flags, phase):
    from fractions import Fraction

    from symbolic.core.units import fmt
    from symbolic.render.summary import PART_NAMES

    monkeypatch.setenv("COLUMNS", "400")  # one line each: nothing wrapped
    _, data = run_json(capsys, "bill", model, *flags, "--gpu-memory", "80GB")
    assert data["verdict_phase"] == phase
    parts = {cls: Fraction(value) for cls, value in data["verdict_parts"].items()}
    assert sum(parts.values()) == Fraction(data["total_bytes"])
    expected = [(PART_NAMES[cls], fmt(size, "GB").removesuffix(" GB")) for cls, size in parts.items() if size]
    assert len(expected) >= 3

    _, text = run_text(capsys, "bill", model, *flags, "--gpu-memory", "80GB", "--brief")
    total_line = next(line for line in text.splitlines() if line.startswith("total per GPU:"))
    assert f"at the {phase}" in total_line
    assert _gb_parts(total_line.split(" = ", 1)[1].split(";")[0]) == expected
    legend = next(line for line in text.splitlines() if line.startswith("█ model states"))
    assert _gb_parts(legend) == expected + [("free", fmt(80 * GB - Fraction(data["total_bytes"]), "GB")[:-3])]

    api = symbolic.bill(model, gpu_memory="80GB", **_api_flags(flags))
    html = api._repr_html_()
    legend_html = html.split('<div style="font-size:85%">', 1)[1].split("</div>", 1)[0]
    import re
    assert _gb_parts(re.sub(r"<[^>]+>■</span>", "", legend_html)) == expected + [
        ("free", fmt(80 * GB - Fraction(data["total_bytes"]), "GB")[:-3])]
    assert api.to_dict()["verdict_parts"] == data["verdict_parts"]
    latex = api._repr_latex_()
    assert latex.count(r"\mathrm{GB}") == len(expected) + 2  # the parts, the total, the GPU


def _api_flags(flags: list[str]) -> dict:
    out, i = {}, 0
    while i < len(flags):
        name = flags[i].removeprefix("--").replace("-", "_")
        if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            value = flags[i + 1]
            out[name] = int(value) if value.isdigit() else value
            i += 2
        else:
            out[name] = True
            i += 1
    return out


def test_one_breakdown_at_a_forward_peak():
    """A forward-peak verdict (SimuMax's DeepSeek-V2 truncated to 4 layers, p = 2, e = 4, the shipped row): the
    total line, the bar legend and the JSON name the same parts, summing to total_bytes."""
    from fractions import Fraction

    from symbolic.core.units import fmt
    from symbolic.render.summary import PART_NAMES, bill_summary
    from symbolic.render.terminal import bar_and_legend, bill_data
    from symbolic.search import throughput

    run = next(r for r in json.loads(throughput.DATA.read_text())
               if r["source"].startswith("MooreThreads/SimuMax") and r["model"].startswith("deepseekv2")
               and r["layout"]["pp"] == 2)
    layout = Layout(tp=1, pp=2, dp=4, ep=4, zero=1, micro_batch=1, global_batch=run["layout"]["gbs"],
                    optimizer="bf16-adam-fp32-grads", optimizer_impl="fused", loss="vocab-parallel")
    bill = make_bill(throughput._model(run), layout, gpu_memory=180 * GB)
    data = bill_data(bill)
    assert data["verdict_phase"] == "forward, last layer of the chunk"
    parts = {cls: Fraction(value) for cls, value in data["verdict_parts"].items()}
    assert sum(parts.values()) == Fraction(data["total_bytes"])
    expected = [(PART_NAMES[cls], fmt(size, "GB").removesuffix(" GB")) for cls, size in parts.items() if size]
    total_line = next(line for line in bill_summary(data, 400) if line.startswith("total per GPU:"))
    assert "at the forward, last layer of the chunk of the first stage" in total_line
    assert _gb_parts(total_line.split(" = ", 1)[1].split(";")[0]) == expected
    legend = bar_and_legend(bill, 400)[1].plain
    assert _gb_parts(legend)[:len(expected)] == expected
