"""Results in a notebook: the summary as HTML (verdict, memory bar) with the
whole text output folded under it, and the bill's total as LaTeX.

Built from the same summary lines as the terminal (:mod:`symbolic.render.summary`);
nothing here computes a number.
"""
from __future__ import annotations

import html
from fractions import Fraction

from ..core.units import fmt

#: bar colours, the terminal's (symbolic.render.terminal.BAR_STYLES) as CSS
COLOURS = {"states": "#1f4e9c", "activations": "#b03aa0", "free": "#cfe8cf", "over": "#d62728",
           "output_side": "#17becf", "transients": "#e0b000", "communication": "#7f7f7f", "rest": "#b03aa0"}


def bar_html(parts, capacity=None) -> str:
    """A memory bar, to scale: ``parts`` ((kind, name, bytes): the verdict's instant, the summary's
    ``total = parts``), then free (or over) memory; under it the legend in the same words and sizes."""
    parts = [(kind, name, Fraction(size)) for kind, name, size in parts]
    total = sum((size for _, _, size in parts), Fraction(0))
    scale = max(total, Fraction(capacity or 0)) or 1
    shown, start = [], Fraction(0)
    for kind, name, size in parts:  # past the capacity, the over cell shows the rest
        inside = max(Fraction(0), min(start + size, capacity or start + size) - start)
        shown.append((kind, name, inside, size))
        start += size
    extra = []
    if capacity:
        extra.append(("free", "free", capacity - total) if total <= capacity else ("over", "over by", total - capacity))
    cells = "".join(f'<div title="{html.escape(name)} {fmt(size, "GB")}" style="width:{float(inside / scale) * 100:.3f}%;'
                    f'background:{COLOURS[kind]}"></div>' for kind, name, inside, size in shown if inside > 0)
    cells += "".join(f'<div title="{name} {fmt(size, "GB")}" style="width:{float(size / scale) * 100:.3f}%;'
                     f'background:{COLOURS[kind]}"></div>' for kind, name, size in extra if size > 0)
    legend = "  ".join(f'<span style="color:{COLOURS[kind]}">■</span> {html.escape(name)} {fmt(size, "GB")}'
                       for kind, name, size in [(k, n, s) for k, n, _, s in shown] + extra if size > 0)
    return (f'<div style="display:flex;height:14px;width:100%;max-width:640px;border:1px solid #888">{cells}</div>'
            f'<div style="font-size:85%">{legend}</div>')


def summary_html(lines: list[str], full_text: str, bar=None) -> str:
    """The summary lines (the verdict coloured), the bar, the full output folded."""
    out = []
    for line in lines:
        escaped = html.escape(line)
        if line.startswith("VERDICT"):
            colour = "#d62728" if "DOES NOT FIT" in line or "NO LAYOUT" in line or "NOTHING FITS" in line \
                else "#2ca02c" if "FITS" in line or "fit" in line else "inherit"
            escaped = f'<b style="color:{colour}">{escaped}</b>'
        out.append(escaped)
    body = "<br>".join(out)
    bar_part = bar_html(*bar) if bar is not None else ""
    return (f'<div class="symbolic-summary" style="font-family:monospace;line-height:1.35">{body}{bar_part}'
            f"<details><summary>details</summary><pre>{html.escape(full_text)}</pre></details></div>")


def bill_latex(data: dict) -> str:
    """``model states + activations (+ the rest of the step's peak) = total (≤ GPU memory: fits)`` as LaTeX:
    the total is the verdict, the step's peak; the papers' total is its first two terms."""
    def gb(value) -> str:
        return fmt(Fraction(value), "GB").replace(",", "{,}").replace(" GB", r"\,\mathrm{GB}")

    from .summary import verdict_parts

    total = Fraction(data["total_bytes"])
    parts = verdict_parts(data)  # the verdict's instant, as the summary's "total = parts"
    text = (" + ".join(rf"\text{{{name}}}" for _, name, _ in parts)
            + " = " + " + ".join(gb(size) for _, _, size in parts) + rf" = {gb(total)}")
    capacity = data.get("gpu_memory_bytes")
    if capacity:
        fits = Fraction(data["headroom_bytes"]) >= 0
        text += (rf" \le {gb(capacity)}\ \text{{(fits)}}" if fits else
                 rf" > {gb(capacity)}\ \text{{(does not fit)}}")
    return f"$\\displaystyle {text}$"
