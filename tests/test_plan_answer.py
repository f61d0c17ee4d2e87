"""plan's answer (issue 45): a pinned choice that is a no-op in the layouts planned is said in the answer's
first lines, not dropped silently; the best layout names every parallel size it chose (t, p, d, c, v, and
for a mixture of experts e and e_t), --brief too."""
import json

from symbolic.cli import main

PINNED = ["plan", "gpt-7b", "--gpus", "8", "--zero", "3", "--pp", "2", "--gpu-memory", "80GB"]


def _out(argv, capsys):
    code = main(argv)
    return code, capsys.readouterr().out


def test_a_pinned_zero_that_no_layout_keeps_is_said_in_the_first_lines(capsys):
    code, text = _out(PINNED + ["--brief"], capsys)
    lines = text.strip().splitlines()
    assert code == 0 and "ZeRO-0" in lines[2]  # the best layout runs ZeRO-0 ...
    head = " ".join(line.strip() for line in lines[:7])
    # ... and the answer says why: every layout with p = 2 on 8 GPUs has one data-parallel rank
    assert ("NOTE: pinned --zero 3 is a no-op in every one of the 30 valid layouts (d·c = 1 there: one "
            "data-parallel rank has nothing to shard") in head, head
    assert "with --pp 2 no layout keeps ZeRO-3 at d·c > 1" in head and "planned ZeRO-0" in head
    assert main(PINNED + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["notes"]) == 1 and data["notes"][0].startswith("pinned --zero 3 is a no-op")
    assert all(layout["zero"] == 0 and layout["dp"] * layout["cp"] == 1 for layout in data["layouts"])


def test_a_pin_kept_in_some_layouts_counts_those_it_is_not(capsys):
    _, text = _out(["plan", "gpt-7b", "--gpus", "8", "--sp", "--gpu-memory", "80GB", "--brief"], capsys)
    head = " ".join(line.strip() for line in text.splitlines())
    assert "NOTE: pinned --sp is a no-op in 405 of 810 valid layouts, the best among them (t = 1 there" in head
    assert main(["plan", "gpt-7b", "--gpus", "8", "--sp", "--gpu-memory", "80GB", "--json"]) == 0
    layouts = json.loads(capsys.readouterr().out)["layouts"]
    assert layouts[0]["tp"] == 1 and not layouts[0]["sp"]


def test_a_pin_every_layout_keeps_adds_no_note(capsys):
    _, text = _out(["plan", "gpt-7b", "--gpus", "8", "--zero", "1", "--dp", "8", "--gpu-memory", "80GB"], capsys)
    assert "NOTE" not in text and "no-op" not in text
    assert main(["plan", "gpt-7b", "--gpus", "8", "--zero", "1", "--dp", "8", "--gpu-memory", "80GB", "--json"]) == 0
    assert "notes" not in json.loads(capsys.readouterr().out)


def test_brief_names_every_parallel_size_of_a_dense_layout(capsys):
    _, text = _out(PINNED + ["--brief"], capsys)
    assert text.splitlines()[2].strip().startswith("t=4 p=2 d=1 c=1 v=1 (8 GPUs), b=4")
    assert " e=" not in text  # a dense model has no expert grid


def test_brief_names_the_expert_grid_it_chose(capsys):
    argv = ["plan", "mixtral-8x7b", "--gpus", "8", "--gpu", "b200", "--seq", "4096", "--tp", "2", "--pp", "1",
            "--dp", "4", "--ep", "4", "--etp", "1", "--sp", "--recompute", "full", "--zero", "1", "--micro-batch", "1"]
    _, text = _out(argv + ["--brief"], capsys)
    assert text.splitlines()[2].strip().startswith("t=2 p=1 d=4 c=1 e=4 e_t=1 v=1 (8 GPUs)"), text
    assert main(argv + ["--json"]) == 0
    best = json.loads(capsys.readouterr().out)["layouts"][0]
    assert (best["ep"], best["etp"]) == (4, 1)
