"""The bill in the terminal (``rich`` tables) and as JSON.

One table per ledger: each line shows its exact value with a unit, the
symbolic formula it came from (papers' letters, sympy syntax), its source and
its condition. A column whose entry is the same on every line of a ledger is
printed once, under the table, instead of on every line. Then a memory bar of
model states and activations against ``--gpu-memory``. A model read from an
HF ``config.json`` with features the inventory does not model carries
``approximations``; they are printed in a panel above the tables and recalled
below them, so no approximated number goes unflagged.

Every number comes from :func:`symbolic.bill.derive.make_bill`; nothing here holds a
formula.
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
import sys
from fractions import Fraction

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..bill.evaluate import Bill, Line
from ..core.units import as_fraction, fmt, fmt_bytes, round_half_up

#: ledger -> (title, kind of value, scope of the numbers)
TITLES = {
    "params": ("PARAMETERS", "params", "whole model"),
    "model_states": ("MODEL STATES", "bytes", "per GPU"),
    "activations": ("ACTIVATIONS", "bytes", "per GPU, stage accounted"),
    "flops": ("FLOPS", "flops", "per iteration, all GPUs, hardware (with recompute)"),
    "output_side": ("OUTPUT SIDE", "bytes", "per GPU on the last pipeline stage, one micro-batch; "
                    "not in the total, as in the papers"),
}

#: the unit of each kind of value in the JSON lines
UNITS = {"params": "params", "bytes": "B", "flops": "FLOPs"}

NOT_COUNTED = ("the output side (listed above, not in the total), embedding activations, kernel workspaces, "
               "communication buffers, allocator fragmentation")

#: width of the memory bar in characters, and its glyphs (distinct without colour)
BAR_WIDTH = 60
BAR_GLYPHS = {"states": "█", "activations": "▒", "free": "·", "limit": "┃"}
BAR_STYLES = {"states": "bold blue", "activations": "magenta", "free": "green", "over": "bold red",
              "limit": "bold red"}

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


def _kind(ledger: str) -> str:
    return TITLES[ledger][1] if ledger in TITLES else "bytes" if ledger.endswith("bytes") else "count"


def ledgers(bill: Bill) -> list[str]:
    """The ledgers of the bill, the four known ones first, in their order."""
    present = list(dict.fromkeys(line.ledger for line in bill.lines))
    return [name for name in TITLES if name in present] + [name for name in present if name not in TITLES]


def _shared(lines: list[Line], attribute: str) -> str | None:
    """The entry of ``attribute`` when every line has the same (non-empty) one."""
    entries = {getattr(line, attribute) for line in lines}
    return entries.pop() if len(entries) == 1 and len(lines) > 1 else None


def ledger_table(bill: Bill, ledger: str) -> Table:
    """One ledger as a table: item, value, formula, source, condition."""
    title, kind, scope = TITLES.get(ledger, (ledger.upper(), _kind(ledger), ""))
    lines = bill.ledger(ledger)
    shared = {attribute: _shared(lines, attribute) for attribute in ("source", "condition")}
    table = Table(title=Text(f"{title}" + (f" ({scope})" if scope else ""), style="bold"), title_justify="left",
                  box=box.SIMPLE_HEAD, show_edge=False, expand=False, pad_edge=False)
    table.add_column("item", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("formula", overflow="fold", style="cyan")
    for attribute, entry in shared.items():
        if entry is None:
            table.add_column(attribute, overflow="fold", style="dim")
    for index, line in enumerate(lines):
        row = [line.name, _value(line.value, kind), line.formula]
        row += [getattr(line, attribute) for attribute, entry in shared.items() if entry is None]
        table.add_row(*row, end_section=index == len(lines) - 1)
    total = sum((as_fraction(line.value) for line in lines), Fraction(0))
    table.add_row(Text("total", style="bold"), Text(_value(total, kind), style="bold"))
    return table


def shared_entries(bill: Bill, ledger: str) -> list[str]:
    """The source and condition common to every line of ``ledger``, said once."""
    lines = bill.ledger(ledger)
    return [f"{attribute} (all lines): {entry}" for attribute in ("source", "condition")
            if (entry := _shared(lines, attribute))]


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
    byte counts, so the cells of each part add up to its rounded share."""
    total = as_fraction(states) + as_fraction(activations)
    scale = max(total, Fraction(capacity or 0))
    if scale == 0:
        return ["free"] * width

    def cell(x) -> int:
        return int(round_half_up(as_fraction(x) * width / scale, 0))

    states_end, total_end = cell(states), cell(total)
    limit = cell(capacity) if capacity else width
    cells = []
    for i in range(width):
        kind = "states" if i < states_end else "activations" if i < total_end else "free"
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
    cells = bar_cells(totals["model_states_bytes"], totals["activation_bytes"], capacity, width)
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


def memory_summary(bill: Bill) -> Group:
    """Model states + activations per GPU, the bar, and the verdict against the GPU."""
    totals = bill.totals
    states, acts, total = totals["model_states_bytes"], totals["activation_bytes"], totals["total_bytes"]
    parts = [Text(f"MEMORY PER GPU: model states {fmt(states, 'GB')} + activations {fmt(acts, 'GB')} = "
                  f"{fmt_bytes(total)}", style="bold")]
    legend = Text()
    legend.append(BAR_GLYPHS["states"], style=BAR_STYLES["states"]).append(f" model states {fmt(states, 'GB')}  ")
    legend.append(BAR_GLYPHS["activations"], style=BAR_STYLES["activations"]).append(
        f" activations {fmt(acts, 'GB')}")
    capacity = totals.get("gpu_memory_bytes")
    if capacity is not None:
        head = totals["headroom_bytes"]
        used = fmt(as_fraction(total) / capacity, "%", 1)
        if head >= 0:
            legend.append("  ").append(BAR_GLYPHS["free"], style=BAR_STYLES["free"]).append(
                f" free {fmt(head, 'GB')}")
            verdict = Text(f"against {fmt_bytes(capacity)}: fits, {used} used, "
                           f"headroom {fmt(head, 'GB')}", style="green")
        else:
            legend.append("  ").append("▓", style=BAR_STYLES["over"]).append(
                f" over by {fmt(-head, 'GB')}")
            verdict = Text(f"against {fmt_bytes(capacity)}: does NOT fit, {used} used, "
                           f"short by {fmt(-head, 'GB')}", style="bold red")
        parts += [Text.assemble(memory_bar(bill), " ", verdict), legend]
    else:
        parts += [Text.assemble(memory_bar(bill), " (no --gpu-memory given: bar scaled to the total)"), legend]
    parts.append(Text(f"not counted: {NOT_COUNTED}", style="dim"))
    return Group(*parts)


def approximations_panel(bill: Bill) -> Panel | None:
    """What the inventory does not model of the source config, one bullet each."""
    notes = bill.model.approximations
    if not notes:
        return None
    body = Text()
    for i, note in enumerate(notes):
        body.append(("\n" if i else "") + "• " + note)
    return Panel(body, title=f"APPROXIMATIONS ({len(notes)}): {bill.model.name} is not modelled exactly",
                 title_align="left", border_style="bold yellow", box=box.HEAVY)


def renderables(bill: Bill) -> list:
    """Everything the text bill prints, in order."""
    model, v = bill.model, bill.values
    header = Text.assemble((f"{model.name}", "bold"), f": {model.source}\n",
                           "  " + " ".join(f"{k}={v[k]}" for k in ("L", "h", "a", "V", "s", "f", "g", "E", "k", "E_s", "f_e") if k in v)
                           + "  |  " + " ".join(f"{k}={v[k]}" for k in ("b", "t", "p", "d", "v") if k in v)
                           + (f" c={v['c']}" if v.get("c", 1) > 1 else "")
                           + (f" L_1={v['L_1']}" if "L_1" in v else "") + "\n",
                           f"  layer inventory: {model.arch}; activations: {bill.strategy}")
    out: list = [header]
    panel = approximations_panel(bill)
    if panel is not None:
        out.append(panel)
    for ledger in ledgers(bill):
        out.append(ledger_table(bill, ledger))
        out.extend(Text("  " + note, style="dim") for note in shared_entries(bill, ledger))
        out.extend(Text("  " + note) for note in _ledger_notes(bill, ledger))
        out.append(Text())
    out.append(memory_summary(bill))
    out.extend(Text(f"note: {note}") for note in bill.notes)
    if panel is not None:
        out.append(Text(f"⚠ {len(model.approximations)} approximations (listed at the top) apply to these numbers: "
                        f"{model.name} is counted with the {model.arch!r} inventory", style="bold yellow"))
    return out


def render_text(bill: Bill, width: int = PIPE_WIDTH, color: bool = False) -> str:
    """The bill as text of ``width`` columns (ANSI colours only if ``color``)."""
    console = Console(file=io.StringIO(), width=width, force_terminal=color, color_system="standard" if color
                      else None, highlight=False, emoji=False)
    for item in renderables(bill):
        console.print(item)
    return "\n".join(line.rstrip() for line in console.file.getvalue().rstrip("\n").split("\n"))


def print_text(bill: Bill, file=None) -> None:
    """Print the bill: colours at the terminal's width on a terminal; plain
    text ``PIPE_WIDTH`` (or ``$COLUMNS``) wide into a pipe or a file."""
    file = file or sys.stdout
    console = Console(file=file, highlight=False, emoji=False)
    if console.is_terminal:
        for item in renderables(bill):
            console.print(item)
    else:
        print(render_text(bill, width=console.width if "COLUMNS" in os.environ else PIPE_WIDTH), file=file)


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, (tuple, list)):  # a layout's recompute modules
        return [_jsonable(item) for item in value]
    value = as_fraction(value)
    return value.numerator if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def render_json(bill: Bill) -> str:
    """The bill as JSON: exact integers (or "p/q" strings) under stable keys.

    Keys are only ever added, never renamed (see the README's table).
    """
    model_config = {f.name: getattr(bill.model, f.name) for f in dataclasses.fields(bill.model)}
    model_config["approximations"] = list(bill.model.approximations)
    data = {
        "model": bill.model.name,
        "values": {k: _jsonable(value) for k, value in bill.values.items()},  # C_f: "p/q" when not whole
        "layout": {k: _jsonable(getattr(bill.layout, k)) for k in bill.layout.__dataclass_fields__},
        "strategy": bill.strategy,
        **{key: _jsonable(value) for key, value in bill.totals.items()},
        "lines": [{"ledger": line.ledger, "name": line.name, "formula": line.formula,
                   "value": _jsonable(line.value), "unit": UNITS.get(_kind(line.ledger), ""),
                   "source": line.source, "condition": line.condition}
                  for line in bill.lines],
        "notes": bill.notes,
        "approximations": list(bill.model.approximations),
        "model_config": model_config,
    }
    return json.dumps(data, indent=2, ensure_ascii=False)
