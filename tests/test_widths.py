"""Every command's text output fits the terminal it is printed in (issue 13):
rendered at 80 and 160 columns (``$COLUMNS``), no line is wider, and a
command that answers a question opens with its verdict."""
import pickle
from importlib.util import find_spec

import pytest

from symbolic.cli import main
from symbolic.step.snapshot import from_allocator_events

LLAMA_HF = "tests/fixtures/hf/Llama-2-7b-hf/config.json"
MIXTRAL_HF = "tests/fixtures/hf/Mixtral-8x7B-v0.1/config.json"

COMMANDS = {
    "bill-175b": ["bill", "gpt-175b", "--tp", "8", "--pp", "8", "--sp", "--recompute", "selective"],
    "bill-7b-80GB": ["bill", "gpt-7b", "--micro-batch", "4", "--tp", "8", "--sp", "--params", "7B",
                     "--gpu-memory", "80GB"],
    "bill-llama-hf": ["bill", LLAMA_HF, "--tp", "8", "--seq", "4096", "--gpu-memory", "80GB"],
    "bill-mixtral": ["bill", MIXTRAL_HF, "--tp", "8", "--pp", "2", "--dp", "2", "--gpu-memory", "80GB"],
    "bill-interleaved": ["bill", "gpt-530b", "--tp", "8", "--pp", "35", "--interleave", "3", "--sp",
                         "--recompute", "selective", "--global-batch", "280", "--gpu-memory", "80GiB"],
    "bill-cp": ["bill", "gpt-7b", "--seq", "32768", "--tp", "8", "--sp", "--cp", "4", "--zero", "1", "--dp", "2"],
    "derive": ["derive", "activations", "--tp", "--sp"],
    "derive-model": ["derive", "flops-hardware", "--model", "mixtral-8x7b", "--recompute", "full"],
    "check": ["check"],
    "plan": ["plan", "gpt-175b", "--gpus", "64", "--gpu-memory", "80GB", "--global-batch", "64", "--top", "5"],
    "plan-none-fits": ["plan", "gpt-175b", "--gpus", "8", "--gpu-memory", "40GB"],
    "solve": ["solve", "gpt-7b", "--max", "seq", "--tp", "8", "--sp", "--micro-batch", "4", "--params", "7B",
              "--gpu-memory", "80GB"],
    "timeline": ["timeline", "gpt-7b", "--seq", "2048", "--tp", "8", "--sp", "--dp", "8", "--zero", "1",
                 "--recompute", "full", "--gpu-memory", "80GB"],
}


# every built-in model, in the layout of its own pipeline where it has one
COMMANDS.update({f"bill-{name}": ["bill", name, "--tp", "8", "--recompute", "selective", "--gpu-memory", "80GB"]
                 for name in ("gpt-22b", "gpt-1t", "llama-2-7b", "mixtral-8x7b")})


def _run(argv, columns, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", str(columns))
    code = main(argv)
    out = capsys.readouterr().out
    assert out.strip(), argv
    return code, out.rstrip("\n").split("\n")


# issue 23: at 80 columns this bill's tables cut 18 values with "…" ("3.49 GB (3.25…")
COMMANDS["bill-qlora-24GB"] = ["bill", "llama-3-8b", "--seq", "4096", "--lora", "16", "--base-dtype", "nf4",
                               "--recompute", "full", "--gpu-memory", "24GB"]


@pytest.mark.parametrize("columns", [60, 80, 160])
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_line_fits_the_width(name, columns, monkeypatch, capsys):
    """No line wider than the terminal, and no value cut: a table that cannot fit folds its item
    column or prints one block per row, never an ellipsis inside a number or a unit."""
    _, lines = _run(COMMANDS[name], columns, monkeypatch, capsys)
    too_wide = [line for line in lines if len(line) > columns]
    assert not too_wide, f"{len(too_wide)} lines over {columns}: {too_wide[:3]}"
    cut = [line for line in lines if "…" in line]
    assert not cut, f"{len(cut)} lines cut at {columns} columns: {cut[:3]}"


@pytest.mark.parametrize("columns", [80, 160])
def test_snapshot_fits(columns, tmp_path, monkeypatch, capsys):
    """(The calculator's and the sheet's one line are held to 80 columns where their pages are built anyway:
    tests/test_calculator.py, tests/test_progress.py — building each again here cost the suite 20 s.)"""
    MiB = 2**20
    monkeypatch.chdir(tmp_path)  # short file names: a path is one word, it cannot wrap
    path = tmp_path / "oom.pickle"
    path.write_bytes(pickle.dumps(from_allocator_events(
        [("alloc", "w", 90 * MiB), ("alloc", "x", 20 * MiB)], capacity=100 * MiB)))
    _, lines = _run(["snapshot", "oom.pickle", "--compare", "gpt-7b", "--tp", "8", "--sp"], columns, monkeypatch,
                    capsys)
    assert max(map(len, lines)) <= columns


@pytest.mark.skipif(find_spec("torch") is None, reason="the trace command needs the torch extra")
@pytest.mark.parametrize("columns", [80, 160])
def test_trace_fits(columns, tmp_path, monkeypatch, capsys):
    (tmp_path / "tiny_layer.py").write_text(
        "import torch\n"
        "def make(s, b):\n"
        "    lin = torch.nn.Linear(4, 4)\n"
        "    return lin, (torch.randn(b, s, 4, requires_grad=True),), {}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _, lines = _run(["trace", "--factory", "tiny_layer:make", "--dims", "s=2,3,4,5", "--dims", "b=1,2,3,4"], columns,
                    monkeypatch, capsys)
    assert max(map(len, lines)) <= columns


def _json(argv, monkeypatch, capsys) -> dict:
    """The command's --json data (the numbers a text test expects are the engine's own)."""
    import json

    capsys.readouterr()
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_bill_at_80_columns_answers_in_its_first_12_lines(monkeypatch, capsys):
    """The issue's done-when: no line over 80, and the first 12 lines say whether it fits."""
    code, lines = _run(COMMANDS["bill-175b"], 80, monkeypatch, capsys)
    assert code == 0 and max(map(len, lines)) <= 80
    head = "\n".join(lines[:12])
    assert lines[0].startswith("gpt-175b")
    from symbolic.core.units import fmt, fmt_bytes
    data = _json(COMMANDS["bill-175b"], monkeypatch, capsys)
    assert f"VERDICT: {fmt(data['total_bytes'], 'GB')} per GPU" in head and "fits 80 GB" in head
    assert "not 40 GB" in head
    assert f"total per GPU: {fmt_bytes(data['total_bytes'])}" in head
    assert f"dominant: model states {fmt(data['model_states_bytes'], 'GB')}" in head
    # no word split: every header of the tables is whole
    assert not any(line.strip() in ("form", "ula", "sour", "ce") for line in lines)


def test_bill_brief_is_the_summary_alone(monkeypatch, capsys):
    _, full = _run(COMMANDS["bill-7b-80GB"], 80, monkeypatch, capsys)
    _, brief = _run(COMMANDS["bill-7b-80GB"] + ["--brief"], 80, monkeypatch, capsys)
    assert 5 <= len(brief) <= 16 and full[: len(brief)] == brief  # 16: the peak's parts, text and legend (issue 21)
    assert "GPU: 80.00 GB (--gpu-memory); step time on A100-SXM4-80GB (the default)" in brief  # the time's GPU
    from symbolic.core.units import fmt
    total = _json(COMMANDS["bill-7b-80GB"], monkeypatch, capsys)["total_bytes"]
    assert f"VERDICT: FITS in 80.00 GB: {fmt(total, 'GB')} per GPU" in "\n".join(brief)
    assert not any(line.startswith("PARAMETERS") for line in brief)


def test_bill_that_does_not_fit_says_by_how_much(monkeypatch, capsys):
    _, brief = _run(["bill", "gpt-7b", "--micro-batch", "8", "--tp", "8", "--sp", "--params", "7B",
                     "--gpu-memory", "80GB", "--brief"], 80, monkeypatch, capsys)
    # b = 8: 14.00 GB + 2 × 52.08 GB = 118.15 GB (the papers' total), and the peak above it, against 80 GB
    from symbolic.core.units import fmt
    data = _json(["bill", "gpt-7b", "--micro-batch", "8", "--tp", "8", "--sp", "--params", "7B",
                  "--gpu-memory", "80GB"], monkeypatch, capsys)
    assert data["paper_total_bytes"] == 118_153_420_800 or fmt(data["paper_total_bytes"], "GB") == "118.15 GB"
    assert (f"VERDICT: DOES NOT FIT in 80.00 GB: {fmt(data['total_bytes'], 'GB')} per GPU" in
            " ".join(" ".join(brief).split()))


@pytest.mark.parametrize("name", ["plan", "solve", "timeline"])
def test_answers_come_first(name, monkeypatch, capsys):
    _, lines = _run(COMMANDS[name] + ["--brief"], 80, monkeypatch, capsys)
    assert any(line.startswith("VERDICT:") for line in lines[:4]), lines


def test_plan_80_columns_drops_columns_160_keeps_them(monkeypatch, capsys):
    _, narrow = _run(COMMANDS["plan"], 80, monkeypatch, capsys)
    _, wide = _run(COMMANDS["plan"], 160, monkeypatch, capsys)
    assert any(line.split()[:2] == ["#", "t·p·d·c"] for line in narrow if line.strip())
    assert any(line.split()[:3] == ["#", "t", "p"] and "states" in line for line in wide)
    assert any(line.startswith("what limits each layout: ") and "#1" in line for line in narrow)


def test_flops_lines_show_one_micro_batch_times_n(monkeypatch, capsys):
    """Seed 001's 7B, global batch 64 over d = 1: n = 64 micro-batches; the qkv line reads
    18*L*b*h**2*s × 64, not 1152*L*b*h**2*s (the JSON's formula keeps the product)."""
    import json

    argv = ["bill", "gpt-7b", "--tp", "8", "--sp", "--global-batch", "64"]
    _, lines = _run(argv, 160, monkeypatch, capsys)
    row = next(line for line in lines if line.startswith("layer/attention/qkv "))
    assert "18*L*b*h**2*s × 64" in row and "1152" not in row
    main(argv + ["--json"])
    data = json.loads(capsys.readouterr().out)
    qkv = next(line for line in data["lines"] if line["name"] == "layer/attention/qkv")
    assert qkv["formula"] == "1152*L*b*h**2*s"
    assert qkv["formula_per_micro_batch"] == "18*L*b*h**2*s" and qkv["micro_batches"] == 64


def test_the_summary_reads_keys_other_ledgers_add():
    """The summary is built from the --json data: a key another ledger adds (a step time, the
    papers' total beside a peak, parameters per GPU) is printed when present."""
    import symbolic
    from symbolic.core.units import fmt
    from symbolic.render.summary import bill_summary

    data = symbolic.bill("gpt-7b", micro_batch=4, tp=8, sp=True, params="7B", gpu_memory="80GB").to_dict()
    for key in ("step_seconds", "paper_total_bytes", "params_per_gpu", "verdict_parts"):  # what the other ledgers add
        data.pop(key, None)
    paper = data["model_states_bytes"] + data["activation_bytes"]
    data.update(total_bytes=paper, headroom_bytes=80 * 10**9 - paper)  # a total that is the papers' sum
    plain = " ".join("\n".join(bill_summary(data, 80)).split())
    assert "step" not in plain and "papers' total" not in plain and "the rest of the peak" not in plain
    data.update(step_seconds=1.25, params_per_gpu=875_000_000, total_bytes=paper + 10**9,
                headroom_bytes=80 * 10**9 - paper - 10**9)  # a peak above the papers' sum
    text = " ".join("\n".join(bill_summary(data, 80)).split())
    assert "step 1.250 s" in text and "parameters per GPU: 875,000,000" in text
    assert f"+ the rest of the peak 1.00 GB; papers' total {fmt(paper, 'GB')}" in text
    assert f"VERDICT: FITS in 80.00 GB: {fmt(paper + 10**9, 'GB')} per GPU" in text
