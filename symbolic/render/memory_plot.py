"""Pictures of memory over a step (optional extra ``plot``: matplotlib).

The timeline drawn the way seed 004 §04.2 describes MemTrace: the four
lifetime classes stacked per instant, the allocated line (their sum) and the
reserved line (the caching-allocator model run over the same step), the
peak instant marked; beside it a bar of the peak's breakdown. The snapshot
picture draws allocated and reserved over a recorded trace.
"""
from __future__ import annotations

CLASS_COLOURS = {"constant": "#4c72b0", "activations": "#dd8452", "transients": "#c44e52",
                 "communication": "#8172b3"}
GiB = 2**30


def use_file_backend() -> None:
    """For the CLI: draw to files only (no display needed)."""
    try:
        import matplotlib
    except ImportError:
        raise ValueError("drawing needs matplotlib: pip install 'symbolic-ledgers[plot]'") from None
    matplotlib.use("Agg")


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("drawing needs matplotlib: pip install 'symbolic-ledgers[plot]'") from None
    return plt


def timeline_figure(result, reserved=None, title: str = "", capacity: int | None = None):
    """A matplotlib figure of a :class:`~symbolic.step.timeline.TimelineValues`.

    ``reserved``: bytes reserved at each instant (allocator model), or None.
    """
    plt = _pyplot()
    from ..step.timeline import CLASSES

    fig, (ax, bar) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3.2, 1]})
    x = list(range(len(result.rows)))
    stacks = [[row[cls] / GiB for _, row in result.rows] for cls in CLASSES]
    ax.stackplot(x, *stacks, labels=CLASSES, colors=[CLASS_COLOURS[c] for c in CLASSES], alpha=0.75, step=None)
    totals = [t / GiB for t in result.totals()]
    ax.plot(x, totals, color="black", lw=1.2, label="allocated (sum of classes)")
    if reserved is not None:
        ax.plot(x, [r / GiB for r in reserved], color="black", lw=1.2, ls="--", label="reserved (allocator model)")
    if capacity:
        ax.axhline(capacity / GiB, color="grey", lw=1, ls=":", label="capacity")
    k = result.t_star_index
    ax.plot([k], [totals[k]], "v", color="red", ms=9, label=f"peak t* = {result.t_star}")
    ax.annotate(f"{result.peak / GiB:.2f} GiB", (k, totals[k]), textcoords="offset points", xytext=(6, 6),
                fontsize=9, color="red")
    ticks = _ticks(result)
    ax.set_xticks([t for t, _ in ticks], [label for _, label in ticks], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("GiB")
    ax.set_xlim(0, max(len(x) - 1, 1))
    ax.set_ylim(0, max(max(totals), max(r / GiB for r in reserved) if reserved else 0,
                       capacity / GiB if capacity else 0) * 1.08)
    fig.suptitle(title or "memory over one training step", fontsize=10)
    # The legend sits above the plot, outside the data it names.
    ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.01, 1, 0.2), mode="expand", ncol=4,
              frameon=False, borderaxespad=0)

    names, sizes, colours = _breakdown(result)
    bar.barh(range(len(names)), sizes, color=colours)
    bar.set_yticks(range(len(names)), names, fontsize=7)
    bar.invert_yaxis()
    bar.set_xlabel("GiB at t*")
    bar.set_title(f"peak breakdown, {result.peak / GiB:.2f} GiB", fontsize=10)
    fig.tight_layout()
    bar.set_xlim(0, max(sizes, default=1) * 1.12)  # room for the last tick label inside the figure
    _declutter(fig, ax.xaxis, keep=_tick_index(ticks, k))
    _declutter(fig, bar.yaxis)
    fig.tight_layout(pad=1.4)
    return fig


#: The peak's breakdown shows this many largest terms; the rest are summed into one bar per class.
BREAKDOWN_TERMS = 14


def _breakdown(result):
    """The largest terms at t* and, past :data:`BREAKDOWN_TERMS`, one "other" bar per class."""
    terms = sorted(result.breakdown, key=lambda term: -term[2])
    shown, rest = terms[:BREAKDOWN_TERMS], terms[BREAKDOWN_TERMS:]
    others: dict[str, int] = {}
    for cls, _, size in rest:
        others[cls] = others.get(cls, 0) + size
    rows = [(cls, name.split("/", 1)[-1], size) for cls, name, size in shown]
    rows += [(cls, f"other {cls}", size) for cls, size in others.items()]
    return ([name for _, name, _ in rows], [size / GiB for _, _, size in rows],
            [CLASS_COLOURS[cls] for cls, _, _ in rows])


def _tick_index(ticks, index) -> int | None:
    return next((i for i, (tick, _) in enumerate(ticks) if tick == index), None)


def _declutter(fig, axis, keep: int | None = None) -> None:
    """Hide tick labels that would overlap a label already kept, measured on the
    renderer (rotated labels included); label ``keep`` (the peak's) always stays."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [label for label in axis.get_ticklabels() if label.get_text()]
    order = list(range(len(labels)))
    if keep is not None and keep < len(labels):
        order.remove(keep)
        order.insert(0, keep)
    kept = []
    for i in order:
        box = labels[i].get_window_extent(renderer).padded(1)
        if any(box.overlaps(other) for other in kept):
            labels[i].set_visible(False)
        else:
            kept.append(box)


def _ticks(result):
    """A few labels: each phase kind once, at its first instant far enough from
    the previous label to stay legible (a twelfth of the axis), and t*."""
    out, seen = [], set()
    gap = max(1, len(result.rows) // 12)
    for index, (label, _) in enumerate(result.rows):
        kind = label.split(" layer")[0] if " layer" in label else label
        clear = not out or index - out[-1][0] >= gap
        if index == result.t_star_index or (kind not in seen and clear):
            seen.add(kind)
            out.append((index, label))
    return out


def snapshot_figure(analysis, title: str = ""):
    """Allocated and reserved over a recorded trace, the peak marked."""
    plt = _pyplot()
    fig, (ax, bar) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3.2, 1]})
    x = list(range(len(analysis.allocated)))
    ax.fill_between(x, [a / GiB for a in analysis.allocated], step="post", alpha=0.5, label="allocated")
    ax.step(x, [r / GiB for r in analysis.reserved], where="post", color="black", lw=1.2, label="reserved")
    k = analysis.peak_index
    ax.plot([k], [analysis.allocated[k] / GiB], "v", color="red", ms=9, label="peak allocated")
    ax.set_xlabel("trace event")
    ax.set_ylabel("GiB")
    fig.suptitle(title or "recorded snapshot", fontsize=10)
    ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.01, 1, 0.2), mode="expand", ncol=3,
              frameon=False, borderaxespad=0)  # above the plot, outside the data
    classes = list(analysis.breakdown)
    bar.barh(classes, [analysis.breakdown[c] / GiB for c in classes], color=[CLASS_COLOURS[c] for c in classes])
    bar.invert_yaxis()
    bar.set_xlabel("GiB at the peak")
    fig.tight_layout(pad=1.4)
    _declutter(fig, ax.xaxis)
    _declutter(fig, bar.yaxis)
    return fig
