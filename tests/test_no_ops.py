"""A flag that changes nothing is accepted with a note, as Megatron-LM does, not refused: SP at t = 1
("Disabling sequence parallelism because tensor model parallelism is disabled", megatron/training/
arguments.py) and a ZeRO stage over one data-parallel rank (d·c = 1)."""
import json
import warnings

import pytest

from symbolic.layout.layout import Layout, settle_no_ops
from symbolic.models.hf import builtin_models


def test_settling_turns_the_no_op_flags_off_and_says_so():
    layout, notes = settle_no_ops(Layout(sp=True, zero=1))
    assert (layout.sp, layout.zero) == (False, 0) and len(notes) == 2
    assert "Disabling sequence parallelism because tensor model parallelism is disabled" in notes[0]
    assert "d·c = 1" in notes[1]
    # Where they do something, nothing changes.
    kept = Layout(tp=2, sp=True, dp=2, zero=1)
    assert settle_no_ops(kept) == (kept, ())
    # Context parallelism counts: ZeRO over d·c = 2 ranks is kept.
    assert settle_no_ops(Layout(cp=2, zero=1, seq=4096))[0].zero == 1


def test_a_no_op_flag_prices_exactly_as_without_it():
    from symbolic.bill.derive import make_bill

    model = builtin_models()["gpt-7b"]
    with_flags = Layout(sp=True, zero=1).validate(model)
    assert with_flags == Layout()
    assert make_bill(model, with_flags).totals == make_bill(model, Layout()).totals


def test_bill_timeline_and_solve_accept_them_with_a_note(capsys):
    from symbolic.cli import main

    assert main(["bill", "gpt-7b", "--sp", "--zero", "1", "--json"]) == 0
    captured = capsys.readouterr()
    assert "note: sp with tp 1 turned off" in captured.err and "zero 1 with d·c = 1" in captured.err
    plain = json.loads(captured.out)
    assert main(["bill", "gpt-7b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == plain
    assert main(["timeline", "gpt-7b", "--sp"]) == 0
    assert "note: sp with tp 1" in capsys.readouterr().err
    assert main(["solve", "gpt-7b", "--max", "micro-batch", "--gpu-memory", "400GB", "--sp"]) == 0
    assert "note: sp with tp 1" in capsys.readouterr().err


def test_a_refused_layout_gets_its_one_line_and_no_note(capsys):
    """A no-op flag beside a layout refused for another reason: the refusal alone (one line, exit 2)."""
    from symbolic.cli import main

    assert main(["bill", "gpt-7b", "--pp", "80", "--sp"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "must be divisible by pp×interleave (80×1)" in err[0]


@pytest.mark.parametrize("argv, refusal", [
    (["bill", "gpt-7b", "--gpu-memory", "0", "--sp"], "--gpu-memory '0'"),       # hypothesis found it
    (["bill", "gpt-7b", "--sp", "--params", "many"], "--params"),
    (["timeline", "gpt-7b", "--sp", "--gpu-memory", "lots"], "--gpu-memory 'lots'"),
])
def test_an_input_refused_after_the_layout_gets_its_one_line_and_no_note(argv, refusal, capsys):
    """A no-op flag beside an input read after the layout (memory, counts): the refusal alone, the note
    held until the command has run and then dropped (``_options.flush_notes``)."""
    from symbolic.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and refusal in err[0] and "note:" not in err[0]
    assert main(["bill", "gpt-7b", "--json"]) == 0   # nothing of the refused call is left for the next
    assert "note:" not in capsys.readouterr().err


def test_the_api_warns_and_prices():
    from symbolic import api

    with pytest.warns(UserWarning, match="Disabling sequence parallelism"):
        noted = api.bill("gpt-7b", sp=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain = api.bill("gpt-7b")
    assert noted.totals == plain.totals


def test_plan_with_a_fixed_zero_stage_keeps_the_one_rank_layouts_as_zero_0():
    from symbolic.search.plan import plan

    model = builtin_models()["gpt-7b"]
    result = plan(model, 8, 80 * 10**9, global_batch=8, fixed={"zero": 1, "dp": 1, "tp": 8})
    best = result.ranked(1)[0]
    assert best.layout.dp == 1 and best.layout.zero == 0
