"""The bill in the terminal (tables, coloured by ``rich`` on a terminal) and as JSON.

One table per ledger: each line shows its exact value with a unit, the
symbolic formula it came from (papers' letters, sympy syntax), its source and
its condition. A column whose entry is the same on every line of a ledger is
printed once, under the table, instead of on every line. Then a memory bar of
model states and activations against ``--gpu-memory``. A model read from an
HF ``config.json`` with features the inventory does not model carries
``approximations``; they are printed in a panel above the tables and recalled
below them, so no approximated number goes unflagged.

Every number comes from :func:`symbolic.bill.derive.make_bill`; nothing here holds a
formula. The text is built from :mod:`symbolic.render.blocks`' types; rich is imported only where its layout
or colours are needed (a terminal, a folded table, the approximations panel), not for a bill into a pipe.
"""
from __future__ import annotations

import io
import textwrap
import os
import sys
from fractions import Fraction

from ..bill.evaluate import Bill, Line
from ..core.units import as_fraction, fmt, fmt_bytes, round_half_up
from .blocks import Group, Panel, Table, Text, plain_lines, to_rich
from .bill_json import TITLES, UNITS, _jsonable, _kind, bill_data, render_json  # noqa: F401 (re-exported)
from .summary import bar_parts

NOT_COUNTED = ("embedding activations, the CUDA context and kernel workspaces, allocator fragmentation "
               "(a bill from an older derivation: the papers' total only)")

#: width of the memory bar in characters, and its glyphs (distinct without colour)
BAR_WIDTH = 60
BAR_GLYPHS = {"states": "█", "activations": "▒", "free": "·", "limit": "┃", "output_side": "░", "transients": "▚",
              "communication": "▪", "rest": "▒"}
BAR_STYLES = {"states": "bold blue", "activations": "magenta", "free": "green", "over": "bold red",
              "limit": "bold red", "output_side": "cyan", "transients": "yellow", "communication": "white",
              "rest": "magenta"}

#: the width of the text when stdout is not a terminal and COLUMNS is unset
PIPE_WIDTH = 160


def _value(value, kind: str) -> str:
    if kind == "bytes":
        return fmt_bytes(value)
    if kind == "flops":
        return fmt(value, "TFLOPs")
    if kind == "params":
        return f"{int(value):,} params"
    return f"{value}"


def ledgers(bill: Bill) -> list[str]:
    """The ledgers of the bill, the four known ones first, in their order."""
    present = list(dict.fromkeys(line.ledger for line in bill.lines))
    return [name for name in TITLES if name in present] + [name for name in present if name not in TITLES]


def _shared(lines: list[Line], attribute: str) -> str | None:
    """The entry of ``attribute`` when every line has the same (non-empty) one."""
    entries = {getattr(line, attribute) for line in lines}
    return entries.pop() if len(entries) == 1 and len(lines) > 1 else None


def _formula(line: Line) -> str:
    """The line's formula; a FLOPs line as its formula of one micro-batch × the micro-batches."""
    if line.micro_batches and line.per_micro_batch:
        return f"{line.per_micro_batch} × {line.micro_batches}"
    return line.formula


def _formula_header(lines: list[Line], narrow: bool = False) -> str:
    if not any(line.micro_batches for line in lines):
        return "formula"
    return "formula × n" if narrow else "formula (one micro-batch) × n micro-batches"


def _multiplier_note(lines: list[Line]) -> list[str]:
    """What the ``× n`` of the FLOPs formulas is."""
    counts = {line.micro_batches for line in lines if line.micro_batches}
    if not counts:
        return []
    return [f"formula × n: the FLOPs of one micro-batch times n = {', '.join(map(str, sorted(counts)))}, "
            "the micro-batches of one iteration over all data-parallel ranks"]


#: The width a renderable is measured at: wider than any table a bill prints, so nothing wraps.
MEASURE_WIDTH = 10_000


def _rich_console(width: int, file=None, color: bool = False):
    """A rich console writing plain text (or ``color``'s ANSI colours) ``width`` columns wide into ``file``
    (a new StringIO); force_jupyter=False: in a notebook kernel rich would otherwise display every print as
    its own output and leave the StringIO empty (the notebook's fold held nothing)."""
    from rich.console import Console

    return Console(file=file if file is not None else io.StringIO(), width=width, force_terminal=color,
                   color_system="standard" if color else None, highlight=False, emoji=False, force_jupyter=False)


def _measure(renderable) -> int:
    """The natural width of ``renderable`` in columns (no wrapping).

    A table's is its columns' widest cells (padding included) plus its dividers (:meth:`Table.natural_widths`,
    measured here without rich); a table with a cell that is not plain text, and any other renderable, is
    measured by rich (``tests/test_render_terminal.py`` checks the two agree on every table)."""
    widths = renderable.natural_widths() if isinstance(renderable, Table) else None
    if widths is not None:
        return renderable.extra_width + sum(widths)
    return _rich_console(MEASURE_WIDTH).measure(to_rich(renderable)).maximum


def _fitted(table: Table, width: int) -> bool:
    """Whether ``table`` fits ``width`` columns; where it does, each column is given the width just measured.

    A table that fits is printed at its columns' natural widths (rich lays it out so: no column shrinks, none
    grows when the table does not expand), so a column fixed at its measured width prints the same cells the
    same way; rich, where it prints the table, then does not measure every cell again."""
    widths = table.natural_widths()
    if widths is None:
        return _measure(table) <= width
    if table.extra_width + sum(widths) > width:
        return False
    for index, (column, size) in enumerate(zip(table.columns, widths)):
        column.width = size - table.padding_width(index)
    return True


def _title(ledger: str) -> Text:
    title, _, scope = TITLES.get(ledger, (ledger.upper(), _kind(ledger), ""))
    return Text(f"{title}" + (f" ({scope})" if scope else ""), style="bold")


def _new_table(ledger: str) -> Table:
    # The title is printed above the table (wrapped to the terminal), not as the table's own
    # title, which rich would wrap to the table's width. (box.SIMPLE_HEAD, no edge: blocks.Table)
    return Table()


def _total_row(table: Table, lines: list[Line], kind: str, cells: int) -> None:
    total = sum((as_fraction(line.value) for line in lines), Fraction(0))
    table.add_row(Text("total", style="bold"), Text(_value(total, kind), style="bold"), *[""] * (cells - 2))


def wide_table(bill: Bill, ledger: str) -> Table:
    """One ledger as a table: item, value, formula, source, condition (a
    column whose entry is the same on every line is said once, below)."""
    kind = _kind(ledger)
    lines = bill.ledger(ledger)
    shared = {attribute: _shared(lines, attribute) for attribute in ("source", "condition")}
    table = _new_table(ledger)
    table.add_column("item", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column(_formula_header(lines), no_wrap=True, style="cyan")
    for attribute, entry in shared.items():
        if entry is None:
            table.add_column(attribute, no_wrap=True, style="dim")
    for index, line in enumerate(lines):
        row = [line.name, _value(line.value, kind), _formula(line)]
        row += [_entry(line, attribute) for attribute, entry in shared.items() if entry is None]
        table.add_row(*row, end_section=index == len(lines) - 1)
    _total_row(table, lines, kind, 3 + sum(entry is None for entry in shared.values()))
    return table


#: each source's citation with its keys, by source (``claims.sources.cite`` depends on the string alone: it
#: searches the fixed bibliography's patterns); a bill's tables and notes ask for the same few sources
#: hundreds of times
_CITED: dict[str, str] = {}


def _cite(entry: str) -> str:
    cited = _CITED.get(entry)
    if cited is None:
        from ..claims.sources import cite

        cited = _CITED[entry] = cite(entry)
    return cited


def _entry(line: Line, attribute: str) -> str:
    """A line's source (with its bibliography keys, docs/sources.md) or condition."""
    entry = getattr(line, attribute)
    return _cite(entry) if attribute == "source" else entry


def ledger_notes(bill: Bill, ledger: str, attributes=("source", "condition")) -> dict[str, int]:
    """The sources and conditions (``attributes``) of ``ledger`` not shared by
    every line, numbered in order of first appearance: ``"source: ..." -> 1``."""
    lines = bill.ledger(ledger)
    numbers: dict[str, int] = {}
    for line in lines:
        for attribute in attributes:
            entry = _entry(line, attribute)
            if entry and _shared(lines, attribute) is None:
                numbers.setdefault(f"{attribute}: {entry}", len(numbers) + 1)
    return numbers


def _references(line: Line, numbers: dict[str, int]) -> str:
    refs = [numbers[key] for attribute in ("source", "condition")
            if (entry := _entry(line, attribute)) and (key := f"{attribute}: {entry}") in numbers]
    return ",".join(map(str, refs))


def narrow_table(bill: Bill, ledger: str, stacked: bool = False, keep_source: bool = False,
                 width: int = PIPE_WIDTH) -> Table:
    """The ledger for a narrower terminal: item, value, formula (``keep_source``:
    and the source) and the numbers of its notes (the conditions, and the
    sources unless kept, printed below the table). ``stacked`` puts the formula
    under the item, for the narrowest terminals."""
    kind = _kind(ledger)
    lines = bill.ledger(ledger)
    numbers = ledger_notes(bill, ledger, ("condition",) if keep_source else ("source", "condition"))
    show_source = keep_source and _shared(lines, "source") is None
    table = _new_table(ledger)
    header = _formula_header(lines, narrow=True)
    values = [_value(line.value, kind) for line in lines] + [_value(sum((as_fraction(line.value) for line in lines),
                                                                        Fraction(0)), kind)]
    refs = [_references(line, numbers) for line in lines] if numbers else []
    if stacked:
        # The narrowest form: the value and note columns keep their whole width (a number and its unit are
        # never cut); the item column, its formula under it, folds onto more lines instead.
        table.add_column(f"item / {header}", overflow="fold")
    else:
        table.add_column("item", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True, min_width=max(map(len, values + ["value"])))
    if not stacked:
        table.add_column(header, no_wrap=True, style="cyan")
    if show_source:
        table.add_column("source", no_wrap=True, style="dim")
    if numbers:
        table.add_column("note", no_wrap=True, style="dim", min_width=max(map(len, refs + ["note"])))
    # the item column's share of the width (the value and note columns and their gaps taken out), where
    # a stacked formula wraps at its spaces, its continuation lines indented under it
    # (a gap is 3 columns: padding, the box's divider, padding)
    room = width - max(map(len, values + ["value"])) - 3 - (max(map(len, refs + ["note"])) + 3 if numbers else 0) - 1
    for index, line in enumerate(lines):
        item = Text(line.name)
        if stacked:
            item.append("\n" + "\n".join(textwrap.wrap(_formula(line), max(room, 20), initial_indent="  ",
                                                       subsequent_indent="    ", break_on_hyphens=False)),
                        style="cyan")
        row = [item, _value(line.value, kind)] + ([] if stacked else [_formula(line)])
        if show_source:
            row.append(_entry(line, "source"))
        if numbers:
            row.append(_references(line, numbers))
        table.add_row(*row, end_section=index == len(lines) - 1)
    _total_row(table, lines, kind, 2 + (not stacked) + show_source + bool(numbers))
    return table


def ledger_table(bill: Bill, ledger: str, width: int = PIPE_WIDTH) -> tuple[Table, list[str]]:
    """The ledger's table in the widest form that fits ``width`` columns, and
    the notes to print under it: every column; else the conditions as
    numbered notes; else the sources too; else the formula under the item."""
    table = wide_table(bill, ledger)
    if _fitted(table, width):
        return table, []
    for keep_source, stacked in ((True, False), (False, False), (False, True)):
        table = narrow_table(bill, ledger, stacked=stacked, keep_source=keep_source, width=width)
        if _fitted(table, width) or stacked:
            attributes = ("condition",) if keep_source else ("source", "condition")
            return table, [f"[{n}] {key}" for key, n in ledger_notes(bill, ledger, attributes).items()]
    raise AssertionError("unreachable")


def shared_entries(bill: Bill, ledger: str) -> list[str]:
    """The source and condition common to every line of ``ledger``, said once."""
    lines = bill.ledger(ledger)
    return [f"{attribute} (all lines): {_cite(entry) if attribute == 'source' else entry}"
            for attribute in ("source", "condition") if (entry := _shared(lines, attribute))]


def _ledger_notes(bill: Bill, ledger: str) -> list[str]:
    totals = bill.totals
    if ledger == "params":
        scopes = "layers + tied embedding" if bill.model.tied else "layers + word embedding, no output layer"
        notes = [f"Megatron Eq 2 ({scopes}): {totals['params_eq2']:,} params "
                 f"({fmt(totals['params_eq2'], 'billion')})"]
        if totals.get("params_hand") is not None:
            notes.append(f"hand-filled N (used for model states): {totals['params_hand']:,} params")
        if totals.get("params_active") is not None:
            notes.append(f"N_active (k experts a token goes through; the FLOPs scale with it): "
                         f"{totals['params_active']:,} params ({fmt(totals['params_active'], 'billion')}); "
                         "the model states hold N_total, every expert")
        if totals.get("params_per_gpu") is not None:
            routed = totals.get("params_routed_experts")
            notes.append(f"held by one GPU (stage accounted): {totals['params_per_gpu']:,} params"
                         + (f"; routed experts {routed:,} of the total, split e·e_t ways on the expert grid"
                            if routed is not None else ""))
        return notes
    if ledger == "flops":
        return [f"model FLOPs (no recompute): {fmt(totals['model_flops_per_iteration'], 'TFLOPs')}; "
                f"{totals['tokens_per_iteration']:,} tokens per iteration; per GPU ({totals['gpus']} GPUs): "
                f"{fmt(totals['flops_per_gpu_per_iteration'], 'TFLOPs')}"]
    return []


def bar_cells(states, activations, capacity=None, width: int = BAR_WIDTH) -> list[str]:
    """The memory bar, cell by cell: ``states``, ``activations``, ``free`` or
    ``over`` (memory past ``capacity``), scaled so the longer of the total and
    the capacity fills ``width``. Boundaries are rounded half up from the exact
    byte counts, so the cells of each part add up to its rounded share
    (:func:`part_cells` of the two parts)."""
    return part_cells((("states", states), ("activations", activations)), capacity, width)


def part_cells(parts, capacity=None, width: int = BAR_WIDTH) -> list[str]:
    """:func:`bar_cells` for any number of parts ((kind, bytes), in order): each part's cells end at its
    running total's rounded share, then ``free`` or ``over``."""
    total = sum((as_fraction(size) for _, size in parts), Fraction(0))
    scale = max(total, Fraction(capacity or 0))
    if scale == 0:
        return ["free"] * width
    ends, running = [], Fraction(0)
    for kind, size in parts:
        running += as_fraction(size)
        ends.append((int(round_half_up(running * width / scale, 0)), kind))
    limit = int(round_half_up(Fraction(capacity) * width / scale, 0)) if capacity else width
    cells = []
    for i in range(width):
        kind = next((kind for end, kind in ends if i < end), "free")
        if capacity and kind != "free" and i >= limit:
            kind = "over"
        elif not capacity and kind == "free":
            kind = "none"
        cells.append(kind)
    return cells


def memory_bar(bill: Bill, width: int = BAR_WIDTH) -> Text:
    """The bar as styled text; past the GPU's capacity a limit mark and red cells."""
    totals = bill.totals
    capacity = totals.get("gpu_memory_bytes")
    # the bar is the verdict: what is alive at its instant, part by part (the summary's "total = parts")
    parts = [(kind, size) for kind, _, size in bar_parts(totals)]
    over = bool(capacity) and sum(as_fraction(size) for _, size in parts) > as_fraction(capacity)
    # past the capacity the limit mark takes a cell of its own: the bar keeps its width (no wrapped "]")
    cells = part_cells(parts, capacity, width - 1 if over else width)
    text = Text("[")
    for i, kind in enumerate(cells):
        if kind == "over" and (i == 0 or cells[i - 1] != "over"):
            text.append(BAR_GLYPHS["limit"], style=BAR_STYLES["limit"])
        if kind == "none":
            continue
        glyph = BAR_GLYPHS["free" if kind == "free" else kind] if kind != "over" else "▓"
        text.append(glyph, style=BAR_STYLES[kind])
    text.append("]")
    return text


def bar_and_legend(bill: Bill, width: int = PIPE_WIDTH) -> list[Text]:
    """The memory bar (the parts of the verdict's instant, free or over) and its legend, in the summary's
    words and sizes."""
    totals = bill.totals
    bar = memory_bar(bill, max(10, min(BAR_WIDTH, width - 2)))
    legend = Text()
    for n, (kind, name, size) in enumerate(bar_parts(totals)):
        legend.append("  " if n else "").append(BAR_GLYPHS[kind], style=BAR_STYLES[kind]).append(
            f" {name} {fmt(size, 'GB')}")
    capacity = totals.get("gpu_memory_bytes")
    if capacity is not None:
        head = totals["headroom_bytes"]
        if head >= 0:
            legend.append("  ").append(BAR_GLYPHS["free"], style=BAR_STYLES["free"]).append(
                f" free {fmt(head, 'GB')}")
        else:
            legend.append("  ").append("▓", style=BAR_STYLES["over"]).append(f" over by {fmt(-head, 'GB')}")
    elif width >= 100:
        legend.append("  (no --gpu-memory: bar scaled to the total)")
    return [bar, legend]


def memory_summary(bill: Bill, width: int = PIPE_WIDTH) -> Group:
    """The verdict per GPU — the peak of the step on the busiest GPU — beside
    the papers' total, against the GPU, and what is not counted (after the
    tables; the bar is in the summary at the top)."""
    totals = bill.totals
    states, acts, total = totals["model_states_bytes"], totals["activation_bytes"], totals["total_bytes"]
    paper = totals.get("paper_total_bytes", total)
    where = totals.get("verdict_phase", "")
    if bill.layout.pp > 1 and where:
        where = (f"pipeline {totals['verdict_stage_words']}, {where}" if "verdict_stage_words" in totals
                 else f"{totals['verdict_stage']} pipeline stage, {where}")
    parts = [wrapped(f"MEMORY PER GPU: {fmt_bytes(total)}, the peak of the step on the busiest GPU ({where})",
                     width, style="bold"),
             wrapped(f"papers' total: model states {fmt(states, 'GB')} + activations {fmt(acts, 'GB')} = "
                     f"{fmt_bytes(paper)}; the verdict adds {fmt(as_fraction(total) - as_fraction(paper), 'GB')} "
                     "(output side, work tensors, communication buffers, recompute window at the peak instant)",
                     width, "  ", "    ")]
    capacity = totals.get("gpu_memory_bytes")
    if capacity is not None:
        head = totals["headroom_bytes"]
        used = fmt(as_fraction(total) / capacity, "%", 1)
        if head >= 0:
            parts.append(wrapped(f"against {fmt_bytes(capacity)}: fits, {used} used, headroom {fmt(head, 'GB')}",
                                 width, style="green"))
        else:
            parts.append(wrapped(f"against {fmt_bytes(capacity)}: does NOT fit, {used} used, "
                                 f"short by {fmt(-head, 'GB')}", width, style="bold red"))
    if getattr(bill, "not_counted", None):
        parts.append(wrapped("not counted: " + "; ".join(
            f"{item} ≈ {fmt(size, 'GB')}" if size else item for item, size, _ in bill.not_counted), width,
            style="dim"))
    else:
        parts.append(wrapped(f"not counted: {NOT_COUNTED}", width, style="dim"))
    return Group(*parts)


def fixes_section(bill: Bill, width: int = PIPE_WIDTH) -> list:
    """When the bill does not fit: the levers that would, each with its new total and its cost."""
    fixes = getattr(bill, "fixes", None)
    if not fixes:
        return []
    out = [wrapped(f"WHAT WOULD MAKE IT FIT ({bill.fix_policy})", width, style="bold")]
    for fix in fixes:
        out.append(wrapped(f"{' + '.join(fix.levers)} {_flags(fix)}: {fmt_bytes(fix.total_bytes)}, headroom "
                           f"{fmt(fix.headroom_bytes, 'GB')} — cost: {fix.cost}", width, "  ", "      "))
    return out


def _flags(fix) -> str:
    """The fix's flags, to append to the command as written: ```--zero 3 --recompute full```."""
    return f"`{' '.join(fix.flags)}`" if fix.flags else ""


def top_fix(bill: Bill, width: int = PIPE_WIDTH) -> list:
    """``--brief``'s last line when the bill does not fit: the first lever of :func:`fixes_section`."""
    fixes = getattr(bill, "fixes", None)
    if not fixes:
        return []
    fix = fixes[0]
    return [wrapped(f"top fix: {' + '.join(fix.levers)} {_flags(fix)}: {fmt_bytes(fix.total_bytes)}, headroom "
                    f"{fmt(fix.headroom_bytes, 'GB')} — cost: {fix.cost} ({len(fixes)} levers without --brief)",
                    width, subsequent="  ")]


def approximations_panel(bill: Bill) -> Panel | None:
    """What the inventory does not model of the source config, one bullet each."""
    notes = bill.model.approximations
    if not notes:
        return None
    body = Text()
    for i, note in enumerate(notes):
        body.append(("\n" if i else "") + "• " + note)
    return Panel(body, title=Text(f"APPROXIMATIONS ({len(notes)}): {bill.model.name} is not modelled exactly"),
                 title_align="left", border_style="bold yellow", box="HEAVY")


def summary(bill: Bill, width: int = PIPE_WIDTH, extra: dict | None = None) -> list:
    """The answer first: model, layout, verdict, total against the GPU, the
    dominant term (:func:`symbolic.render.summary.bill_summary`, from the
    bill's JSON data and the ``extra`` keys other ledgers add, e.g. the step
    time), then the memory bar."""
    from .summary import bill_summary

    lines = bill_summary(dict(bill_data(bill), **(extra or {})), width)
    out: list = []
    for line in lines:
        style = ("bold green" if "VERDICT: FITS" in line else "bold red" if "DOES NOT FIT" in line
                 else "bold" if line.startswith("VERDICT") or line is lines[0] else "")
        out.append(Text(line, style=style))
    return out + bar_and_legend(bill, width)


def renderables(bill: Bill, width: int = PIPE_WIDTH, brief: bool = False, extra: dict | None = None) -> list:
    """Everything the text bill prints, in order: the summary; unless
    ``brief``, the itemised ledgers after it."""
    out: list = summary(bill, width, extra)
    if brief:  # the answer alone; when it does not fit, the first lever of the fix policy with it
        return out + top_fix(bill, width)
    model, v = bill.model, bill.values
    dims = ("dimensions: " + " ".join(f"{k}={v[k]}" for k in MODEL_LETTERS if k in v)
            + "  |  " + " ".join(f"{k}={v[k]}" for k in ("b", "t", "p", "d", "v") if k in v)
            + (f" c={v['c']}" if v.get("c", 1) > 1 else "")
            + (f" L_1={v['L_1']} L_p={v['L_p']}" if "L_1" in v else "") + (f" L_m={v['L_m']}" if "L_m" in v else ""))
    out += [Text(), wrapped(dims, width), wrapped(f"layer inventory: {model.arch}; activations: {bill.strategy}",
                                                  width)]
    panel = approximations_panel(bill)
    if panel is not None:
        out.append(panel)
    out.append(Text())
    for ledger in ledgers(bill):
        table, notes = ledger_table(bill, ledger, width)
        out.append(wrapped(_title(ledger).plain, width, style="bold", subsequent="  "))
        out.append(table)
        dim = notes + shared_entries(bill, ledger) + _multiplier_note(bill.ledger(ledger))
        out.extend(wrapped(note, width, "  ", style="dim", subsequent="      ") for note in dim)
        out.extend(wrapped(note, width, "  ", subsequent="      ") for note in _ledger_notes(bill, ledger))
        out.append(Text())
    out.append(memory_summary(bill, width))
    out.extend(fixes_section(bill, width))
    out.extend(wrapped(f"note: {note}", width) for note in bill.notes)
    out.append(wrapped("sources: the [keys] are listed, with arXiv ids and what each source is, in docs/sources.md",
                       width, style="dim"))
    if panel is not None:
        out.append(wrapped(f"⚠ {len(model.approximations)} approximations (listed at the top) apply to these "
                           f"numbers: {model.name} is counted with the {model.arch!r} inventory", width,
                           style="bold yellow"))
    return out


def wrapped(text: str, width: int, indent: str = "", style: str = "", subsequent: str | None = None) -> Text:
    """``text`` as a Text wrapped at word boundaries (a number stays with its
    unit), each continuation line indented."""
    from .summary import wrap

    return Text("\n".join(wrap(text, width, indent, subsequent)), style=style)


def output_width(file=None) -> int:
    """The width to print at: ``$COLUMNS`` if set, else the terminal's, else
    ``PIPE_WIDTH`` (into a pipe or a file)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    file = file or sys.stdout
    if hasattr(file, "isatty") and file.isatty():
        import shutil

        return shutil.get_terminal_size().columns
    return PIPE_WIDTH


def run_wrapped(run, args) -> int:
    """``run(args)`` with its plain ``print`` lines wrapped to the terminal's width
    (:class:`symbolic.render.summary.WrappingWriter`); ``--json`` output passes as is."""
    import contextlib

    from .summary import WrappingWriter

    if getattr(args, "json", False):
        return run(args)
    writer = WrappingWriter(sys.stdout, output_width())
    try:
        with contextlib.redirect_stdout(writer):
            return run(args)
    finally:
        writer.flush()


def render_renderables(items, width: int = PIPE_WIDTH, color: bool = False) -> str:
    """The bill's renderables as text of ``width`` columns, trailing spaces removed.

    Without colours each item that :func:`symbolic.render.blocks.plain_lines` lays out (plain text that
    fits, a table at its natural widths) is written as those lines, rich's layout of it; the others, and
    every item in colour, are printed by rich."""
    out: list[str] = []
    console = None
    for item in items:
        lines = None if color else _plain_lines(item, width)
        if lines is not None:
            out.extend(lines)
            continue
        if console is None:
            console = _rich_console(width, color=color)
        console.print(to_rich(item))
        out.extend(_flush(console))
    return "\n".join(line.rstrip() for line in "\n".join(out).rstrip("\n").split("\n"))


def _flush(console) -> list[str]:
    """What ``console`` has printed since the last call, as lines (its StringIO emptied)."""
    text = console.file.getvalue()
    console.file.seek(0)
    console.file.truncate()
    return text.removesuffix("\n").split("\n") if text else []


def _plain_lines(item, width: int) -> list[str] | None:
    """``item``'s lines without rich (:func:`symbolic.render.blocks.plain_lines`); a text whose characters
    blocks does not know the width of is measured by rich's ``cell_len`` alone (no console), and printed as
    its own characters where each line fits and holds no tab — rich prints such text unchanged."""
    lines = plain_lines(item, width)
    if lines is None and type(item) is Text and "\t" not in (plain := item.plain):
        from rich.cells import cell_len

        lines = plain.split("\n")
        if not all(cell_len(line) <= width for line in lines):
            return None
    return lines


def render_text(bill: Bill, width: int = PIPE_WIDTH, color: bool = False, brief: bool = False,
                extra: dict | None = None) -> str:
    """The bill as text of ``width`` columns (ANSI colours only if ``color``)."""
    return render_renderables(renderables(bill, width, brief, extra), width, color)


def _may_be_terminal(file) -> bool:
    """Whether rich could take ``file`` for a terminal (rich 13.7-15's ``Console.is_terminal``: a
    ``TTY_COMPATIBLE=1`` or non-empty ``FORCE_COLOR`` environment, or ``isatty()``); where not, rich would
    print the plain text, and it is not imported."""
    if os.environ.get("TTY_COMPATIBLE") == "1" or os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(file, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:
        return False


def print_text(bill: Bill, file=None, brief: bool = False, extra: dict | None = None) -> None:
    """Print the bill: colours at the terminal's width on a terminal; plain
    text ``PIPE_WIDTH`` (or ``$COLUMNS``) wide into a pipe or a file."""
    file = file or sys.stdout
    width = output_width(file)
    if _may_be_terminal(file):
        from rich.console import Console

        console = Console(file=file, highlight=False, emoji=False, width=width)
        if console.is_terminal:
            for item in renderables(bill, width, brief, extra):
                console.print(to_rich(item))
            return
    print(render_text(bill, width=width, brief=brief, extra=extra), file=file)


#: The model's letters the bill's header shows, in this order (the families' own letters last).
MODEL_LETTERS = ("L", "h", "a", "V", "s", "f", "g", "E", "k", "E_s", "f_e", "P", "d_h", "L_d", "f_s", "r_q", "r_kv",
                 "d_n", "d_r", "d_v", "L_n", "L_w", "w", "n_m", "d_m", "d_s", "g_m", "p_c", "Q", "L_s", "L_a",
                 "L_c", "K_c", "L_l", "H_k", "H_v", "D_k", "D_v")
