"""Every refusal names a fix that works when applied as written (issue 23 item 3): each command
below is refused with one line ending ``try `--flag value```; the test applies the first fix it
names to the command and checks that the command then runs."""
import re

import pytest

from symbolic.cli import main

FIX = re.compile(r"try (dropping )?`([^`]+)`")

REFUSED = [
    ["bill", "mixtral-8x7b", "--ep", "8"],                       # the issue's: ep×etp must divide t·d·c
    ["bill", "mixtral-8x7b", "--ep", "3"],                       # ep must divide E
    ["bill", "mixtral-8x7b", "--tp", "2", "--etp", "1", "--dp", "2"],  # etp ≠ tp needs SP
    ["bill", "gpt-7b", "--tp", "3"],                             # heads by tp
    ["bill", "llama-3-8b", "--tp", "16"],                        # K/V heads by tp
    ["bill", "gpt-7b", "--pp", "5"],                             # layers by pp
    ["bill", "gpt-7b", "--pp", "4", "--interleave", "3"],        # layers by pp·v
    ["bill", "gpt-7b", "--interleave", "2"],                     # interleave without a pipeline
    ["bill", "gpt-7b", "--global-batch", "7", "--dp", "2"],      # global batch by b·d
    ["bill", "gpt-7b", "--pp", "2", "--interleave", "2", "--global-batch", "3"],  # whole rounds of pp
    ["bill", "gpt-7b", "--seq", "1000", "--tp", "16", "--sp"],   # seq by t under SP
    ["bill", "gpt-7b", "--cp", "3"],                             # seq by cp
    ["bill", "gpt-7b", "--zero", "3", "--pp", "2", "--dp", "2"],  # ZeRO-3 with a pipeline
    # (ZeRO over one rank and SP with tp 1 are no refusal: turned off with a note, tests/test_no_ops.py)
    ["bill", "llama-3-8b", "--base-dtype", "nf4"],               # a quantised base without LoRA
    ["bill", "gpt-7b", "--offload", "params", "--tp", "2"],      # parameter offload with TP
    ["bill", "gpt-7b", "--recompute-modules", "core_attn"],      # modules without selective recompute
    ["timeline", "gpt-7b", "--tp", "3"],
    ["solve", "gpt-7b", "--max", "micro-batch", "--gpu-memory", "80GB", "--tp", "3"],  # (--pp 5: solved over uneven splits now)
]


def _apply(argv: list[str], dropping: bool, fix: str) -> list[str]:
    flag, *value = fix.split()
    out = list(argv)
    if flag in out:
        at = out.index(flag)
        takes_value = at + 1 < len(out) and not out[at + 1].startswith("--")
        del out[at: at + 1 + takes_value]
    return out if dropping else out + [flag, *value]


@pytest.mark.parametrize("argv", REFUSED, ids=lambda argv: " ".join(argv[1:]))
def test_the_suggested_fix_runs(argv, capsys):
    assert main(argv + ["--brief"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    found = FIX.search(err)
    assert found, f"no concrete fix in: {err}"
    fixed = _apply(argv, bool(found.group(1)), found.group(2))
    code = main(fixed + ["--brief"])
    captured = capsys.readouterr()
    assert code in (0, 1) and not captured.err.strip(), (fixed, captured.err)  # 1: runs, nothing fits (solve)
    assert "VERDICT" in captured.out


def test_every_alternative_of_the_expert_grid_refusal_runs(capsys):
    """``ep×etp (8×2) must divide t·d·c (8)``: both fixes it names work (``--dp 8``, ``--ep 4``)."""
    argv = ["bill", "mixtral-8x7b", "--seq", "4096", "--tp", "2", "--dp", "4", "--ep", "8", "--sp", "--brief"]
    assert main(argv) == 2
    fixes = re.findall(r"`([^`]+)`", capsys.readouterr().err)
    assert fixes == ["--dp 8", "--ep 4"]
    for fix in fixes:
        assert main(_apply(argv, False, fix)) == 0
        capsys.readouterr()


def test_the_issues_refusal_names_dp_8(capsys):
    assert main(["bill", "mixtral-8x7b", "--ep", "8"]) == 2
    assert "try `--dp 8`" in capsys.readouterr().err
