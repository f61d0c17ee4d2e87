"""What the terminal bill is made of — styled text, tables, a group, a panel — and their plain layout.

The bill's text is built from these small types, not from ``rich``'s: rich is imported only where its
layout is needed (colours on a terminal, a table that folds a cell, the approximations panel, a character
whose width is not known here), so a bill into a pipe or a file — the cold ``bill`` of issue 24 — does not
pay rich's import (≈ 30-50 ms of a 0.15 s process on these machines). :func:`to_rich` builds the same objects
rich was given before, so a terminal's colours are rich's, unchanged.

The plain layout (:func:`plain_lines`) reproduces rich's own for the one form the bill's tables take:
``box.SIMPLE_HEAD``, no edge, padding (0, 1) but none at the edges, a rule under the header, a blank line
at a section's end, every column at its natural width (``no_wrap``; the table fits). It answers None for
anything else, and the caller hands that item to rich. ``tests/test_render_terminal.py`` checks the two
layouts agree, character for character, on every table and every width the bill prints.
"""
from __future__ import annotations

import re

#: Characters one terminal cell wide, in rich's measure (``rich.cells.cell_len``; rich 13.7-15) as in a
#: terminal's: printable ASCII, Latin-1 and Latin Extended to U+02FF (not the soft hyphen U+00AD), Greek and
#: Cyrillic, general punctuation, arrows, mathematical operators, box drawing and block elements up to
#: U+25FC (U+25FD/U+25FE are wide emoji). ``tests/test_render_terminal.py`` checks every one against rich.
NARROW_RANGES = ((0x20, 0x7E), (0xA0, 0xAC), (0xAE, 0x2FF), (0x370, 0x482), (0x2010, 0x2027),
                 (0x2030, 0x205E), (0x2190, 0x21FF), (0x2200, 0x22FF), (0x2500, 0x25FC))
#: a character outside them (a character class: no set of thousands built at import)
_NOT_NARROW = re.compile("[^" + "".join(f"\\U{start:08x}-\\U{end:08x}" for start, end in NARROW_RANGES) + "]")


def _narrow(line: str) -> bool:
    """Whether every character of ``line`` is one of :data:`NARROW_RANGES`."""
    return _NOT_NARROW.search(line) is None


class Text:
    """Styled text: a base text and style, then appended spans, each with its own style (rich's
    ``Text(text, style=...)`` and ``.append(text, style=...)``, the part the bill uses)."""

    __slots__ = ("text", "style", "spans")

    def __init__(self, text: str = "", style: str = ""):
        self.text, self.style, self.spans = text, style, []

    def append(self, text: str, style: str = "") -> Text:
        self.spans.append((text, style))
        return self

    @property
    def plain(self) -> str:
        return self.text + "".join(text for text, _ in self.spans)


class Column:
    """A table column (rich's ``Table.add_column`` arguments the bill uses; ``width`` fixed once measured)."""

    __slots__ = ("header", "justify", "no_wrap", "style", "min_width", "overflow", "width")

    def __init__(self, header: str, justify: str = "left", no_wrap: bool = False, style: str = "",
                 min_width: int | None = None, overflow: str = "ellipsis", width: int | None = None):
        self.header, self.justify, self.no_wrap, self.style = header, justify, no_wrap, style
        self.min_width, self.overflow, self.width = min_width, overflow, width


class Table:
    """A ledger's table: ``box.SIMPLE_HEAD``, no edge, no padding at the edges, not expanding (the only
    form the bill prints); cells are ``str`` or :class:`Text`, both printed as their characters (never read
    as rich markup: rich took a citation's ``[seed004, NCCL]`` for a style tag and dropped it).
    (Plain classes, not dataclasses: a dataclass costs ≈ 0.3 ms to create at import.)"""

    __slots__ = ("columns", "rows", "_widths")

    def __init__(self):
        self.columns: list[Column] = []
        self.rows: list[tuple[tuple, bool]] = []  # (cells, end_section)
        self._widths = False  # natural_widths' answer once measured (False: not yet)

    def add_column(self, header: str, **options) -> None:
        self.columns.append(Column(header, **options))
        self._widths = False

    def add_row(self, *cells, end_section: bool = False) -> None:
        self.rows.append((cells, end_section))
        self._widths = False

    @property
    def row_count(self) -> int:
        return len(self.rows)

    @property
    def extra_width(self) -> int:
        """The dividers' columns: one between each two columns (no edge)."""
        return len(self.columns) - 1

    def padding_width(self, index: int) -> int:
        """A column's padding: one space each side, none at the table's edges."""
        return (index > 0) + (index < len(self.columns) - 1)

    def natural_widths(self) -> tuple[int, ...] | None:
        """Each column's width, padding included, as rich measures it — its widest cell line (header
        too), at least ``min_width`` — or None where a cell is not :func:`plain_cell` text. Measured once
        (a ledger's table is measured to choose its form, then laid out): a column later fixed at its
        measured width (``terminal._fitted``) measures the same."""
        if self._widths is False:
            self._widths = self._measure()
        return self._widths

    def _measure(self) -> tuple[int, ...] | None:
        widths = []
        for index, column in enumerate(self.columns):
            cells = [column.header] + [cells[index] if index < len(cells) else "" for cells, _ in self.rows]
            longest = 0
            for cell in cells:
                lines = plain_cell(cell)
                if lines is None:
                    return None
                longest = max([longest] + [len(line) for line in lines])
            pad = self.padding_width(index)
            widths.append(column.width + pad if column.width is not None
                          else max(longest + pad, (column.min_width or 0) + pad))
        return tuple(widths)


class Group:
    """Renderables printed one after another (rich's ``Group(*items)``)."""

    __slots__ = ("items",)

    def __init__(self, *items):
        self.items = list(items)


class Panel:
    """Text in a box with a title (rich's ``Panel``; always left to rich)."""

    __slots__ = ("body", "title", "title_align", "border_style", "box")

    def __init__(self, body: Text, title: Text, title_align: str = "left", border_style: str = "",
                 box: str = "HEAVY"):
        self.body, self.title, self.title_align, self.border_style, self.box = (body, title, title_align,
                                                                                border_style, box)


def plain_cell(cell) -> list[str] | None:
    """A cell's lines, where each character is one cell wide, none a tab or a control character (then its
    width is its length); else None."""
    if isinstance(cell, Text):
        text = cell.plain
    elif isinstance(cell, str):
        text = cell
    else:
        return None
    lines = text.split("\n") if text else []
    return lines if all(_narrow(line) for line in lines) else None


def plain_lines(item, width: int) -> list[str] | None:
    """``item`` laid out in ``width`` columns as rich lays it out without colours, trailing spaces removed;
    None where rich must lay it out (see the module's docstring)."""
    if isinstance(item, Text):
        text = item.plain
        lines = text.split("\n")
        return lines if all(_narrow(line) and len(line) <= width for line in lines) else None
    if isinstance(item, Group):
        out = []
        for part in item.items:
            lines = plain_lines(part, width)
            if lines is None:
                return None
            out += lines
        return out
    if isinstance(item, Table):
        return _table_lines(item, width)
    return None


def _table_lines(table: Table, width: int) -> list[str] | None:
    widths = table.natural_widths()
    if widths is None or table.extra_width + sum(widths) > width or not table.columns:
        return None
    count = len(table.columns)
    columns = table.columns
    if any(column.justify not in ("left", "right") for column in columns):
        return None

    def row(cells) -> str | None:
        parts = []
        for index, (column, size) in enumerate(zip(columns, widths)):
            cell = cells[index] if index < len(cells) else ""
            lines = plain_cell(cell)
            if lines is None or len(lines) > 1:
                return None  # a folded or stacked cell: rich's vertical layout
            text = lines[0] if lines else ""
            left = 1 if index > 0 else 0
            inner = size - left - (1 if index < count - 1 else 0)
            body = text.rjust(inner) if column.justify == "right" else text.ljust(inner)
            parts.append(" " * left + body + (" " if index < count - 1 else ""))
        return " ".join(parts).rstrip()

    header = row([column.header for column in columns])
    if header is None:
        return None
    out = [header, "─" * (sum(widths) + count - 1)]
    for index, (cells, end_section) in enumerate(table.rows):
        line = row(cells)
        if line is None:
            return None
        out.append(line)
        if end_section and index < len(table.rows) - 1:
            out.append("")
    return out


def to_rich(item):
    """``item`` as the rich renderable the bill printed before these types (imports rich)."""
    from rich import box
    from rich.console import Group as RichGroup
    from rich.panel import Panel as RichPanel
    from rich.table import Table as RichTable
    from rich.text import Text as RichText

    def text(value: Text):
        out = RichText(value.text, style=value.style)
        for part, style in value.spans:
            out.append(part, style=style or None)
        return out

    def cell(value):  # a string as Text: its characters, not rich markup
        return text(value) if isinstance(value, Text) else RichText(value) if isinstance(value, str) else value

    if isinstance(item, Text):
        return text(item)
    if isinstance(item, Group):
        return RichGroup(*(to_rich(part) for part in item.items))
    if isinstance(item, Panel):
        return RichPanel(text(item.body), title=text(item.title), title_align=item.title_align,
                         border_style=item.border_style, box=getattr(box, item.box))
    if isinstance(item, Table):
        table = RichTable(box=box.SIMPLE_HEAD, show_edge=False, expand=False, pad_edge=False)
        for column in item.columns:
            table.add_column(cell(column.header), justify=column.justify, no_wrap=column.no_wrap, style=column.style,
                             min_width=column.min_width, overflow=column.overflow, width=column.width)
        for cells, end_section in item.rows:
            table.add_row(*(cell(value) for value in cells), end_section=end_section)
        return table
    return item
