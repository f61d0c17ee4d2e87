"""What plan shows (issue 23 item 6): layouts whose numbers are identical are one row, with the choice
that made no difference said; the header states the verdict rule; --brief ends with the top fix."""
import json

from symbolic.cli import main

LLAMA = ["plan", "llama-3-8b", "--gpus", "2", "--gpu", "b200", "--seq", "4096", "--top", "6"]


def _out(argv, capsys):
    code = main(argv)
    return code, capsys.readouterr().out


def test_identical_layouts_merge_into_one_row(capsys):
    _, text = _out(LLAMA, capsys)
    assert main(LLAMA + ["--json"]) == 0
    layouts = json.loads(capsys.readouterr().out)["layouts"]
    # the JSON keeps every layout: LLaMA's fused attention saves no s×s tensor, so selective = none
    pairs = [(a, b) for a, b in zip(layouts[::2], layouts[1::2])
             if {a["recompute"], b["recompute"]} == {"none", "selective"} and a["total_bytes"] == b["total_bytes"]]
    assert len(pairs) == 3
    rows = [line for line in text.splitlines() if line.strip()[:2].strip().isdigit() and " no " in line]
    assert len(rows) == 3 and all("none*" in row for row in rows), rows
    assert "* #1, #2, #3: recompute none = selective here (the same numbers: one row shown)" in text
    assert "... 99 more fit" in text  # counted against the layouts listed, not the rows


def test_the_header_states_the_verdict_rule(capsys):
    _, text = _out(LLAMA, capsys)
    assert "memory: fits when the peak of the step on the busiest GPU (the bill's verdict" in " ".join(
        line.strip() for line in text.splitlines())
    assert "model states + activations (the stage the bill accounts)" not in text


def test_brief_ends_with_the_top_fix_when_nothing_fits(capsys):
    code, text = _out(["plan", "gpt-175b", "--gpus", "8", "--gpu-memory", "40GB", "--brief"], capsys)
    lines = text.strip().splitlines()
    assert code == 1 and lines[1].startswith("VERDICT: NO LAYOUT FITS")
    assert any(line.startswith("top fix (closest layout): ") for line in lines[-3:]), lines[-3:]


def test_bill_brief_ends_with_the_top_fix_when_it_does_not_fit(capsys):
    _, text = _out(["bill", "llama-3-8b", "--gpu", "h100", "--brief"], capsys)
    assert main(["bill", "llama-3-8b", "--gpu", "h100", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)["fixes"][0]
    tail = " ".join(line.strip() for line in text.strip().splitlines()[-2:])
    assert tail.startswith(f"top fix: {' + '.join(first['levers'])} `{first['flags']}`: ")
