"""The timeline picture (symbolic.render.memory_plot; issue 13): the legend
outside the data, no two labels overlapping — measured on the saved figure's
text extents with matplotlib's renderer."""
import itertools

import pytest

pytest.importorskip("matplotlib")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import symbolic  # noqa: E402

CASES = {
    "full-recompute": dict(seq=2048, tp=8, sp=True, dp=8, zero=1, recompute="full", gpu_memory="80GB"),
    "no-recompute": dict(seq=4096, micro_batch=4, tp=8, sp=True, gpu_memory="80GB"),
    "pipeline": dict(seq=2048, tp=4, pp=4, recompute="selective", optimize=["flash-attention"]),
}


def _texts(fig):
    """Every visible text of the figure with its extent on the renderer (the legend as one box)."""
    renderer = fig.canvas.get_renderer()
    boxes = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            # matplotlib lays out labels of ticks past the limits too, but does not draw them
            for location, label in zip(axis.get_majorticklocs(), axis.get_ticklabels()):
                if label.get_visible() and label.get_text() and low - 1e-9 <= location <= high + 1e-9:
                    boxes.append((f"tick {label.get_text()!r}", label.get_window_extent(renderer)))
        for text in (ax.xaxis.label, ax.yaxis.label, ax.title):
            if text.get_text():
                boxes.append((f"label {text.get_text()!r}", text.get_window_extent(renderer)))
        if ax.get_legend() is not None:
            boxes.append(("legend", ax.get_legend().get_window_extent(renderer)))
    if fig._suptitle is not None:
        boxes.append(("title", fig._suptitle.get_window_extent(renderer)))
    return boxes


@pytest.mark.parametrize("name", sorted(CASES))
def test_legend_outside_the_data_and_no_label_overlaps(name, tmp_path):
    step = symbolic.timeline("gpt-7b", **CASES[name])
    fig = step.figure()
    fig.set_dpi(110)  # as the CLI saves it (--png): measure the layout of the saved figure
    fig.savefig(tmp_path / "step.png", dpi=110)
    fig.canvas.draw()
    data_axes = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    legend = data_axes.get_legend().get_window_extent(renderer)
    assert not legend.overlaps(data_axes.get_window_extent(renderer)), "the legend covers the data"
    boxes = _texts(fig)
    clashes = [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2) if box_a.overlaps(box_b)]
    assert not clashes, clashes[:5]
    # the peak's tick label stays
    assert any(label.get_visible() and label.get_text() == step.t_star for label in data_axes.get_xticklabels())
    # nothing is drawn outside the saved figure
    figure_box = fig.bbox
    outside = [a for a, box in boxes if box.x0 < figure_box.x0 - 1 or box.x1 > figure_box.x1 + 1
               or box.y0 < figure_box.y0 - 1 or box.y1 > figure_box.y1 + 1]
    assert not outside, outside


def test_snapshot_figure_keeps_its_legend_off_the_data(tmp_path):
    import pickle

    from symbolic.render.memory_plot import snapshot_figure
    from symbolic.step.snapshot import analyse, from_allocator_events, loads

    MiB = 2**20
    events = [("alloc", ("w", k), 8 * MiB) for k in range(6)] + [("free", ("w", k)) for k in (1, 3)]
    analysis = analyse(loads(pickle.dumps(from_allocator_events(events, capacity=100 * MiB))), transient_allocs=0)
    fig = snapshot_figure(analysis, "a crafted trace")
    fig.savefig(tmp_path / "trace.png", dpi=fig.dpi)
    renderer = fig.canvas.get_renderer()
    legend = fig.axes[0].get_legend().get_window_extent(renderer)
    assert not legend.overlaps(fig.axes[0].get_window_extent(renderer))
    boxes = _texts(fig)
    assert not [(a, b) for (a, x), (b, y) in itertools.combinations(boxes, 2) if x.overlaps(y)]
