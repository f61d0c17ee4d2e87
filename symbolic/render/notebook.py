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
COLOURS = {"states": "#1f4e9c", "activations": "#b03aa0", "free": "#cfe8cf", "over": "#d62728"}


def bar_html(states, activations, capacity=None) -> str:
    """A memory bar: model states, activations and free (or over) memory, to scale."""
    states, activations = Fraction(states), Fraction(activations)
    total = states + activations
    scale = max(total, Fraction(capacity or 0)) or 1
    parts = [("states", min(states, capacity or states)), ("activations",
             max(Fraction(0), min(total, capacity or total) - states))]
    if capacity:
        parts.append(("free", max(Fraction(0), capacity - total)) if total <= capacity else ("over", total - capacity))
    cells = "".join(f'<div title="{kind} {fmt(size, "GB")}" style="width:{float(size / scale) * 100:.3f}%;'
                    f'background:{COLOURS[kind]}"></div>' for kind, size in parts if size > 0)
    return f'<div style="display:flex;height:14px;width:100%;max-width:640px;border:1px solid #888">{cells}</div>'


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

    total = Fraction(data["total_bytes"])
    rest = total - Fraction(data["model_states_bytes"]) - Fraction(data["activation_bytes"])
    text = (r"\text{model states} + \text{activations}"
            + (r" + \text{the rest of the peak}" if rest else "")
            + rf" = {gb(data['model_states_bytes'])} + {gb(data['activation_bytes'])}"
            + (rf" + {gb(rest)}" if rest else "") + rf" = {gb(total)}")
    capacity = data.get("gpu_memory_bytes")
    if capacity:
        fits = Fraction(data["headroom_bytes"]) >= 0
        text += (rf" \le {gb(capacity)}\ \text{{(fits)}}" if fits else
                 rf" > {gb(capacity)}\ \text{{(does not fit)}}")
    return f"$\\displaystyle {text}$"
