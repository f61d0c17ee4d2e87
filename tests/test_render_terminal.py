"""The bill's terminal tables, memory bar, approximations and JSON (symbolic.render.terminal)."""
from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest

from symbolic.models import config as bill_module  # where BILLED_ARCHITECTURES lives
from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.models.hf import load_hf_config
from symbolic.layout.layout import Layout
from symbolic.models.builtin import preset
from symbolic.render.terminal import PIPE_WIDTH, bar_cells, print_text, render_json, render_text

LLAMA = Path(__file__).parent / "fixtures" / "hf" / "Llama-2-7b-hf" / "config.json"

#: Seed 001 §5's 7B example: L=32, h=4096, s=4096, b=4, TP=8 (+SP), N = 7B, 80 GB.
SEED_7B = dict(micro_batch=4, tp=8, sp=True)


def _bill(micro_batch=4, gpu=80 * 10**9, **layout):
    return make_bill(preset("gpt-7b"), Layout(**dict(SEED_7B, micro_batch=micro_batch, **layout)),
                     params_hand=7 * 10**9, gpu_memory=gpu)


@pytest.fixture(scope="module")
def seed_7b_text():
    return render_text(_bill())


def test_seed_7b_numbers_and_verdict(seed_7b_text):
    text = seed_7b_text
    # seed 001 §1's 66.08 GB is the papers' total; the verdict is the step's peak (at the loss: transformers'
    # eager loss, on the whole vocabulary on every TP rank — its fp32 log-softmax, bf16 logits and fp32
    # gradient, 10·s·b·V·(1 − 1/t) = 7.34 GB more than a vocabulary shard would hold)
    assert "papers' total: model states 14.00 GB + activations 52.08 GB = 66.08 GB (61.54 GiB)" in text
    assert "MEMORY PER GPU: 74.57 GB (69.44 GiB), the peak of the step on the busiest GPU (loss)" in text
    assert "fits, 93.2% used, headroom 5.43 GB" in text
    assert "Megatron Eq 2 (layers + tied embedding): 6,670,647,296 params" in text


def test_one_table_per_ledger_with_formula_source_condition(seed_7b_text):
    lines = seed_7b_text.splitlines()
    for title in ("PARAMETERS (whole model)", "MODEL STATES (per GPU)", "ACTIVATIONS (per GPU, stage accounted)",
                  "FLOPS (per iteration, all GPUs, hardware (with recompute))"):
        assert title in lines
    row = next(line for line in lines if line.startswith("attention/softmax_output"))
    assert row.split() == ["attention/softmax_output", "17.18", "GB", "(16.00", "GiB)", "2*L*a*b*s**2/t",
                           "bf16,", "split:", "tensor-parallel", "/t"]
    row = next(line for line in lines if line.startswith("layer/attention/qkv_weight"))
    assert "3*L*h**2" in row and "Narayanan et al. 2021 §5.1 (Eq 2) [Narayanan2021]" in row
    # at 160 columns the parameters' conditions go under the table as numbered notes (issue 13)
    note = row.split()[-1]
    assert f"  [{note}] condition: Q, K, V: three h×h" in lines
    assert "bf16 parameters            1.75 GB (1.63 GiB)   2*Psi/(p*t)" in lines
    # A source or condition shared by every line of a ledger is said once, under its table.
    # each source cites its bibliography keys (docs/sources.md; issue 13)
    assert "  source (all lines): ZeRO §3.1; seed 001 §3 [ZeRO2019, seed001]" in lines
    assert "  source (all lines): Korthikanti et al. 2022 §4.1 [Korthikanti2022]" in lines
    # reworded (issue 13): backward is twice the forward, stated as such
    assert "  condition (all lines): forward (1×) + backward (2×: input and weight gradients)" in lines
    assert any(line.startswith("total") and "52.08 GB (48.50 GiB)" in line for line in lines)


def test_no_trailing_spaces_and_width(seed_7b_text):
    lines = seed_7b_text.splitlines()
    assert all(line == line.rstrip() for line in lines)
    assert max(map(len, lines)) <= PIPE_WIDTH
    narrow = render_text(_bill(), width=100)
    assert max(map(len, narrow.splitlines())) <= 100


def test_bar_cells_fit():
    # 14.00 GB states and 52.08 GB activations in 80 GB over 60 cells:
    # states 14/80·60 = 10.5 -> 11 (half up), total 66.08/80·60 = 49.56 -> 50.
    cells = bar_cells(14 * 10**9, 52_076_478_464, 80 * 10**9, 60)
    assert Counter(cells) == {"states": 11, "activations": 39, "free": 10}
    assert cells[10:12] == ["states", "activations"]


def test_bar_cells_over_capacity():
    # b = 8: 118.15 GB fills the bar; the 80 GB limit falls at 80/118.15·60 = 40.6 -> 41.
    cells = bar_cells(14 * 10**9, 2 * 52_076_478_464, 80 * 10**9, 60)
    assert Counter(cells) == {"states": 7, "activations": 34, "over": 19}
    assert cells.index("over") == 41


def test_bar_without_gpu_memory_is_scaled_to_the_total():
    cells = bar_cells(1, 3, None, 8)
    assert cells == ["states"] * 2 + ["activations"] * 6


def test_over_capacity_text():
    text = render_text(_bill(micro_batch=8))
    assert "does NOT fit, 168.8% used, short by 55.06 GB" in text
    bar = next(line for line in text.splitlines() if line.startswith("["))
    # 135.06 GB fills the bar: the limit at 80/135.06·60 = 35.5 -> 36, states 14/135.06·60 = 6
    assert bar.count("┃") == 1 and bar.count("▓") == 24 and bar.count("█") == 6


def test_approximations_panel_is_prominent():
    from symbolic.models.builtin import preset
    model = preset("deepseek-v3")  # multi-token prediction, the router's buffer, the dense first layers
    assert len(model.approximations) >= 2
    text = render_text(make_bill(model, Layout(tp=8)), width=200)
    lines = text.splitlines()
    top = next(i for i, line in enumerate(lines) if "APPROXIMATIONS" in line)
    assert top < next(i for i, line in enumerate(lines) if line.startswith("PARAMETERS"))
    assert f"APPROXIMATIONS ({len(model.approximations)}): deepseek-v3 is not modelled exactly" in lines[top]
    body = " ".join(line.strip("┃ ") for line in lines[top + 1:top + 1 + 2 * len(model.approximations)])
    for note in model.approximations:
        assert note.split(":")[0] in body
    assert lines[-1].startswith(f"⚠ {len(model.approximations)} approximations (listed at the top) apply")
    assert "APPROXIMATIONS" not in render_text(_bill())


def test_json_keys_are_kept_and_added():
    data = json.loads(render_json(_bill()))
    assert {"model", "values", "layout", "strategy", "params", "params_eq2", "params_hand", "params_for_states",
            "model_states_bytes", "activation_bytes", "total_bytes", "gpu_memory_bytes",
            "flops_per_iteration", "model_flops_per_iteration", "flops_per_gpu_per_iteration",
            "tokens_per_iteration", "gpus", "headroom_bytes", "lines", "notes",
            "approximations", "model_config"} <= set(data)
    assert (data["model_states_bytes"], data["activation_bytes"], data["paper_total_bytes"]) == \
        (14_000_000_000, 52_076_478_464, 66_076_478_464)
    # the eager loss on the whole vocabulary: 10·s·b·V·(1 − 1/t) = 7,340,032,000 B above a vocabulary shard's
    assert (data["total_bytes"], data["headroom_bytes"]) == (67_225_865_220 + 7_340_032_000, 5_434_102_780)
    assert {"paper_total_bytes", "verdict_stage", "verdict_phase", "not_counted"} <= set(data)
    assert data["approximations"] == [] and data["model_config"]["arch"] == "gpt"
    line = next(x for x in data["lines"] if x["name"] == "attention/softmax_output")
    assert line == {"ledger": "activations", "name": "attention/softmax_output", "formula": "2*L*a*b*s**2/t",
                    "value": 17_179_869_184, "unit": "B", "source": "Korthikanti et al. 2022 §4.1",
                    "condition": "bf16, split: tensor-parallel /t"}
    assert {x["unit"] for x in data["lines"]} == {"params", "B", "FLOPs"}
    verdict = [x for x in data["lines"] if x["ledger"] == "verdict"]
    assert sum(x["value"] for x in verdict) == data["total_bytes"]


def test_print_text_into_a_pipe_is_the_plain_text(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    print_text(_bill(), file=out)
    assert out.getvalue() == render_text(_bill()) + "\n"


def test_colour_only_when_asked():
    assert "\x1b[" in render_text(_bill(), color=True)
    assert "\x1b[" not in render_text(_bill())


def test_the_readme_command(capsys):
    assert main(["bill", "gpt-7b", "--micro-batch", "4", "--tp", "8", "--sp", "--params", "7B",
                 "--gpu-memory", "80GB"]) == 0
    out = capsys.readouterr().out
    # a papers' model bills Megatron's vocab-parallel loss by default (transformers' eager: headroom 12.77 GB)
    assert "= 66.08 GB (61.54 GiB)" in out and "headroom 12.87 GB" in out and "vocab-parallel loss" in out
    assert "+329,344,512 params (+4.94% of the config count)" in out


@pytest.mark.parametrize("width", [PIPE_WIDTH, 60])
def test_table_measure_is_richs(width):
    """``_measure``'s one-pass width of a table is rich's own measurement, for the wide and narrow forms."""
    from rich.console import Console

    from symbolic.render.blocks import to_rich
    from symbolic.render.terminal import MEASURE_WIDTH, _measure, ledger_table, ledgers, narrow_table, wide_table

    bill = _bill()
    console = Console(file=io.StringIO(), width=MEASURE_WIDTH, color_system=None, emoji=False, force_jupyter=False)
    tables = [ledger_table(bill, ledger, width)[0] for ledger in ledgers(bill)]
    tables += [wide_table(bill, ledger) for ledger in ledgers(bill)]
    tables += [narrow_table(bill, ledger, stacked=stacked, keep_source=keep, width=width)
               for ledger in ledgers(bill) for keep, stacked in ((True, False), (False, False), (False, True))]
    widths = [_measure(table) for table in tables]
    assert widths == [console.measure(to_rich(table)).maximum for table in tables]
    assert min(widths) > 10


@pytest.mark.parametrize("width", [PIPE_WIDTH, 100, 60])
def test_fitted_table_prints_as_richs_own_layout(width):
    """A table that fits is given its measured column widths (rich does not measure its cells again while
    printing): it prints the same characters and colours as the same table left to rich's layout, and one
    that does not fit keeps its columns flexible."""
    from rich.console import Console

    from symbolic.render.blocks import to_rich
    from symbolic.render.terminal import _fitted, _measure, ledgers, narrow_table, wide_table

    def printed(table, color):
        console = Console(file=io.StringIO(), width=width, force_terminal=color,
                          color_system="standard" if color else None, highlight=False, emoji=False,
                          force_jupyter=False)
        console.print(to_rich(table))
        return console.file.getvalue()

    bill = _bill()
    fitted = 0
    for ledger in ledgers(bill):
        for make in (lambda: wide_table(bill, ledger),
                     lambda: narrow_table(bill, ledger, keep_source=True, width=width),
                     lambda: narrow_table(bill, ledger, width=width),
                     lambda: narrow_table(bill, ledger, stacked=True, width=width)):
            table, free = make(), make()
            fits = _fitted(table, width)
            assert fits == (_measure(free) <= width)
            assert all(column.width is not None for column in table.columns) == fits
            assert all(column.width is None for column in free.columns)
            fitted += fits
            for color in (False, True):
                assert printed(table, color) == printed(free, color)
    assert fitted > 0


def _rich_text(items, width: int) -> str:
    """The bill's renderables as rich alone prints them without colours (every item through rich's console,
    as the bill was printed before render/blocks.py), trailing spaces removed."""
    from rich.console import Console

    from symbolic.render.blocks import to_rich

    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False, emoji=False,
                      force_jupyter=False)
    for item in items:
        console.print(to_rich(item))
    return "\n".join(line.rstrip() for line in console.file.getvalue().rstrip("\n").split("\n"))


@pytest.mark.parametrize("name, layout", [("gpt-7b", SEED_7B), ("deepseek-v3", dict(tp=8, ep=8, dp=8)),
                                          ("mixtral-8x7b", dict(tp=2, pp=4, dp=4, ep=2, zero=1))])
def test_plain_layout_is_richs(name, layout):
    """Without colours the bill is laid out without rich where it can be (render/blocks.py: plain text
    that fits, a table at its natural widths) and by rich elsewhere (the approximations panel, a stacked
    table, a word wider than the terminal): the text is rich's own layout of every item, at every width."""
    from symbolic.render.blocks import plain_lines
    from symbolic.render.terminal import renderables

    model = preset(name)
    bill = make_bill(model, Layout(**layout).validate(model), gpu_memory=80 * 10**9)
    plain = 0
    for width in (24, 40, 60, 80, 100, 130, 160, 220):
        items = renderables(bill, width)
        assert render_text(bill, width) == _rich_text(items, width), (name, width)
        plain += sum(plain_lines(item, width) is not None for item in items)
    assert plain > 0


def test_table_cells_are_their_characters():
    """A cell is printed as its characters, never read as rich markup (rich took the citation keys
    ``[seed004, NCCL]`` for a style tag and dropped them from the communication table's source column);
    a character whose width blocks does not know, a tab, a cell of two lines: that table is left to rich
    (None), and the text is still rich's layout."""
    from symbolic.render.blocks import Table, Text, plain_lines
    from symbolic.render.terminal import render_renderables

    def table(cell):
        out = Table()
        out.add_column("item", no_wrap=True)
        out.add_column("value", justify="right", no_wrap=True)
        out.add_row(cell, "1 B", end_section=True)
        out.add_row(Text("total", style="bold"), Text("1 B"))
        return out

    for cell in ("中文", "tab\there", Text("two\nlines"), "emoji ◽"):
        assert plain_lines(table(cell), 80) is None, cell
    for cell in ("[bold]x[/bold]", "a \\[b]", "seed 004 §02.4 [seed004, NCCL]", "[Narayanan2021] × h·s — ≈ ≤ →"):
        lines = plain_lines(table(cell), 80)
        assert lines is not None and lines[2].startswith(cell), cell
    for cell in ("[bold]x[/bold]", "seed 004 [seed004, NCCL]", "中文", Text("two\nlines"), "tab\there"):
        items = [Text("title"), table(cell), Text("end")]
        text = render_renderables(items, 40)
        assert text == _rich_text(items, 40), cell
        assert isinstance(cell, Text) or "\t" in cell or cell in text, cell
    bill = make_bill(preset("gpt-175b"), Layout(tp=8, dp=4, zero=1))
    assert "(NCCL_BUFFSIZE × channels; DDP bucket) [seed004, NCCL]" in render_text(bill, 300)


def test_narrow_characters_are_one_cell_in_rich():
    """Every character render/blocks.py measures as its length is one cell wide in rich's own measure."""
    from rich.cells import cell_len

    from symbolic.render.blocks import NARROW_RANGES, _narrow

    characters = "".join(chr(code) for start, end in NARROW_RANGES for code in range(start, end + 1))
    assert _narrow(characters)
    assert [ch for ch in characters if cell_len(ch) != 1] == []
    assert not any(_narrow(ch) for ch in "\t\n\x1b\xad\u25fd\u231a中")


def test_remembered_citations_are_cites():
    """The tables' remembered citations are ``claims.sources.cite``'s, asked again or for the first time."""
    from symbolic.claims.sources import cite
    from symbolic.render.terminal import _CITED, _cite, ledgers, shared_entries, wide_table

    bill = _bill()
    for ledger in ledgers(bill):
        wide_table(bill, ledger), shared_entries(bill, ledger)
    sources = {line.source for line in bill.lines}
    assert sources <= set(_CITED)
    assert all(_CITED[source] == cite(source) for source in sources)
    assert _cite("ZeRO §3.1; seed 001 §3") == "ZeRO §3.1; seed 001 §3 [ZeRO2019, seed001]"
    assert _cite("no source of the bibliography") == "no source of the bibliography"


@pytest.mark.parametrize("columns", [40, 59, 60, 61, 80])
def test_an_over_capacity_bar_keeps_to_the_width(columns, monkeypatch, capsys):
    """Past the capacity the limit mark takes a cell of the bar's own width: its "]" never wraps onto a
    line of its own (issue 45: at 60 columns it did)."""
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["bill", "llama-3-8b", "--gpu", "h100", "--brief"]) == 0
    lines = capsys.readouterr().out.splitlines()
    bar = next(line for line in lines if line.startswith("["))
    assert bar.endswith("]") and len(bar) <= columns and "]" not in [line.strip() for line in lines]


def test_a_step_time_that_leaves_a_mechanism_out_says_so_in_the_brief(capsys):
    """Issue 42: ``--offload optimizer`` priced the step as on-GPU Adam and ``--brief`` did not say so; the
    summary names what the step time leaves out, right under it."""
    assert main(["bill", "llama-3-8b", "--gpu", "h100", "--offload", "optimizer", "--brief"]) == 0
    out = capsys.readouterr().out
    assert "⚠ not in the step time: ZeRO-Offload (--offload optimizer)" in out
    assert main(["bill", "llama-3-8b", "--gpu", "h100", "--brief"]) == 0
    assert "not in the step time" not in capsys.readouterr().out
