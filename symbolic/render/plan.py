"""``plan``'s output: the ranked layouts as text (a table at every width) and as JSON, from a
:class:`symbolic.search.plan.Plan` — what ``symbolic plan`` prints and ``symbolic.plan()`` returns.
It lives below the commands so that the command and the Python API render with the same code."""
from __future__ import annotations

import json


#: The most layouts listed (each with exact totals, ≈ 0.5 ms apiece): --top 0 lists all up to this.
MAX_LISTED = 20_000


def margin_words(margin: int) -> str:
    """How a header names the margin: the default's origin (the bill's not-counted estimate), or its size."""
    from ..bill.evaluate import default_margin
    from ..core.units import fmt  # (core.numeric re-exports it, but imports sympy)
    if not margin:
        return "no margin"
    if margin == default_margin():
        return f"margin {fmt(margin, 'GB')} (the bill's not-counted CUDA context and workspaces; --margin 0 drops it)"
    return f"margin {fmt(margin, 'GB')}"


def top_fix(result, closest) -> str:
    """When no layout fits: the first lever of the bill's fix policy (``symbolic.bill.levers``) for the
    closest layout, against the usable memory — what ``bill`` of that layout would suggest first."""
    from ..bill.cache import derivation
    from ..bill.evaluate import evaluate
    from ..bill.levers import what_would_fit
    from ..core.units import fmt

    model, layout, hand = result.model, closest.layout, result.params_hand
    bill = evaluate(derivation(model, layout, hand), model, layout, hand, result.usable, None)
    fixes = what_would_fit(bill, hand)
    if not fixes:
        return "top fix: none of the bill's levers makes the closest layout fit; more GPUs or a larger GPU (--gpu)"
    fix = fixes[0]
    flags = f" `{' '.join(fix.flags)}`" if fix.flags else ""
    return (f"top fix (closest layout): {' + '.join(fix.levers)}{flags}: {fmt(fix.total_bytes, 'GB')}, headroom "
            f"{fmt(fix.headroom_bytes, 'GB')} — cost: {fix.cost}")


def _assumptions(result) -> dict[str, str]:
    from ..core.units import fmt  # (core.numeric re-exports it, but imports sympy)

    return {
        "memory": (f"fits when the peak of the step on the busiest GPU (the bill's verdict: model states, the "
                   "chunks in flight, the output side, transients and communication buffers alive at its peak "
                   f"instant) ≤ {fmt(result.gpu_memory, 'GB')} − margin {fmt(result.margin, 'GB')} = "
                   f"{fmt(result.usable, 'GB')}; kernel workspaces and allocator fragmentation are not counted "
                   "(--margin reserves for them)"),
        "time": (f"step = GEMMs (FLOPs per GPU / peak × GEMM efficiency of the call's size) + element-wise "
                 "kernels, the loss's too (HBM) + exposed communication (α + ring factor × bytes / bus bandwidth; "
                 f"NVLink inside a domain of {result.gpus_per_node} GPUs by Megatron's rank order t, c, d, p, else the "
                 "network) + the SMs hidden collectives take + pipeline bubble "
                 + ("(p−1)/(v·m)" if not getattr(result, "schedule", "") or result.schedule in ("1f1b", "interleaved")
                    else f"of the {result.schedule} schedule, its order simulated with each chunk's F, B and W "
                    "(layout.schedules.simulate)")
                 + " + optimizer step (HBM); "
                 "m = micro-batches per pipeline per "
                 f"iteration; {result.overlap.describe()}; {result.hardware.describe()}"),
        "rank": ("time per sequence (= step time at a fixed global batch), then fewest context-parallel ranks, "
                 "then fewest expert-grid ranks e·e_t, "
                 "then headroom, then fewest t·p"),
    }


#: The columns of plan's table: (header, unit line, width, left-aligned, cell of a ranked layout).
#: ``FULL`` prints at 160 columns; ``COMPACT`` fits 80 (layout as t·p·d·c, no per-ledger sizes;
#: what binds each layout is said under the table).
#: e and e_t (the expert grid), shown for a mixture of experts only.
EXPERT_GRID = ("e·e_t", "", 5, False, lambda rank, item: f"{item.layout.ep}·{item.layout.etp or item.layout.tp}")


BUBBLE = ("bubble", "", 6, False, lambda rank, item: f"{item.bubble:.1%}")

#: The layers of the first, each middle and the last stage (Megatron-Core's uneven split), shown when a listed
#: layout is uneven: ``2/4/3``; ``even`` where the layers divide.
SPLIT = ("split", "", 8, True, lambda rank, item: "/".join(map(str, item.split)) if item.split else "even")


#: The columns both forms share: schedule, micro-batching, ZeRO, SP and recompute.
SCHEDULE_COLUMNS = (
    ("v", "", 2, False, lambda rank, item: str(item.layout.interleave)),
    SPLIT,
    ("b", "", 3, False, lambda rank, item: str(item.layout.micro_batch)),
    ("m", "", 4, False, lambda rank, item: str(item.micro_batches_per_pipeline)),
    ("ZeRO", "", 4, False, lambda rank, item: str(item.layout.zero)),
    ("SP", "", 3, False, lambda rank, item: "yes" if item.layout.sp else "no"),
    ("recompute", "", 10, True, lambda rank, item: item.layout.recompute),
)


FULL = (
    ("#", "", 3, False, lambda rank, item: str(rank)),
    ("t", "", 2, False, lambda rank, item: str(item.layout.tp)),
    ("p", "", 3, False, lambda rank, item: str(item.layout.pp)),
    ("d", "", 4, False, lambda rank, item: str(item.layout.dp)),
    ("c", "", 3, False, lambda rank, item: str(item.layout.cp)),
    EXPERT_GRID,
    *SCHEDULE_COLUMNS,
    ("states", "GB", 9, False, lambda rank, item: _gb(item.totals["model_states_bytes"])),
    ("activ.", "GB", 9, False, lambda rank, item: _gb(item.totals["activation_bytes"])),
    ("total", "GB", 9, False, lambda rank, item: _gb(item.totals["total_bytes"])),
    ("headroom", "GB", 9, False, lambda rank, item: _gb(item.headroom_bytes)),
    ("TFLOP/s", "per GPU", 8, False, lambda rank, item: f"{item.model_tflops_per_gpu:.1f}"),
    ("MFU", "", 5, False, lambda rank, item: f"{item.mfu:.1%}"),
    ("step", "s", 8, False, lambda rank, item: f"{item.step_seconds:.3f}"),
    BUBBLE,
    (" binding", "", 0, True, lambda rank, item: " " + item.binding),
)


COMPACT = (
    ("#", "", 3, False, lambda rank, item: str(rank)),
    ("t·p·d·c", "", 11, True,
     lambda rank, item: "·".join(str(getattr(item.layout, k)) for k in ("tp", "pp", "dp", "cp"))),
    EXPERT_GRID,
    *SCHEDULE_COLUMNS,
    ("total", "GB", 7, False, lambda rank, item: _gb(item.totals["total_bytes"])),
    ("free", "GB", 7, False, lambda rank, item: _gb(item.headroom_bytes)),
    ("step", "s", 7, False, lambda rank, item: f"{item.step_seconds:.3f}"),
    BUBBLE,
)


def for_model(columns: tuple, moe: bool, uneven: bool = False) -> tuple:
    """``columns`` with the expert grid's column only for a mixture of experts, the split's only where a listed
    layout's stages are uneven."""
    return tuple(column for column in columns if (moe or column is not EXPERT_GRID) and (uneven or column is not SPLIT))


def table_lines(shown, columns, marks: dict | None = None) -> list[str]:
    """The ranked layouts as fixed-width lines under ``columns``; ``marks`` (rank → column headers)
    puts a ``*`` after the cells of a choice that made no difference (:func:`merge_identical`)."""
    marks = marks or {}

    def line(cells) -> str:
        return " ".join(cell.ljust(width) if left else cell.rjust(width)
                        for cell, (_, _, width, left, _) in zip(cells, columns)).rstrip()

    out = [line([header for header, *_ in columns]), line([unit for _, unit, *_ in columns])]
    out += [line([cell(rank, item) + ("*" if header in marks.get(rank, ()) else "")
                  for header, *_, cell in columns]) for rank, item in enumerate(shown, 1)]
    return [text for text in out if text]


#: The swept choices whose rows merge when they change no number: (column header, Layout field, printed as).
MERGEABLE = (("recompute", "recompute", str), ("SP", "sp", lambda sp: "SP" if sp else "no SP"),
             ("ZeRO", "zero", lambda zero: f"ZeRO-{zero}"))


def merge_identical(shown) -> tuple[list, dict[int, list[tuple[str, list[str]]]]]:
    """``shown`` with the layouts whose numbers are identical (exact totals, headroom and step time)
    and that differ in one swept choice only merged into the first of them, and, by rank in the merged
    list, the choices that made no difference: ``{1: [("recompute", ["none", "selective"])]}``."""
    from dataclasses import replace

    merged, same, index = [], {}, {}
    for item in shown:
        numbers = (tuple(sorted((key, str(value)) for key, value in item.totals.items())), str(item.headroom_bytes),
                   item.step_seconds, item.bubble)
        keys = [(header, replace(item.layout, **{field: None}), numbers) for header, field, _ in MERGEABLE]
        hit = next((key for key in keys if key in index), None)
        if hit is not None:
            rank = index[hit]
            header, field, show = next(choice for choice in MERGEABLE if choice[0] == hit[0])
            entry = dict(same.setdefault(rank, []))
            entry.setdefault(header, [show(getattr(merged[rank - 1].layout, field))]).append(
                show(getattr(item.layout, field)))
            same[rank] = list(entry.items())
            continue
        merged.append(item)
        for key in keys:
            index.setdefault(key, len(merged))
    return merged, same


def same_lines(same: dict) -> list[str]:
    """The notes of :func:`merge_identical`: ``#1: recompute none = selective here (the same numbers)``."""
    ranks: dict[str, list[int]] = {}
    for rank, choices in sorted(same.items()):
        text = "; ".join(("recompute " if header == "recompute" else "") + f"{' = '.join(values)} here"
                         for header, values in choices)
        ranks.setdefault(text, []).append(rank)
    return [f"* {', '.join(f'#{rank}' for rank in listed)}: {text} (the same numbers: one row shown)"
            for text, listed in ranks.items()]


def block_lines(shown, columns, width: int) -> list[str]:
    """The ranked layouts one block each (``#1 t·p·d·c 1·1·8·1, v 1, ...``), wrapped to ``width``: the
    form below the compact table's width, where a column would cut a number."""
    from ..render.summary import wrap

    out = []
    for rank, item in enumerate(shown, 1):
        cells = [(header.strip(), unit, cell(rank, item)) for header, unit, _, _, cell in columns[1:]]
        out += wrap(f"#{rank} " + ", ".join(f"{header} {value}" + (f" {unit}" if unit else "")
                                            for header, unit, value in cells), width, subsequent="    ")
    return out


def _bindings(shown) -> list[str]:
    """What limits each listed layout, grouped: ``compute: #1–#5``."""
    groups: dict[str, list[int]] = {}
    for rank, item in enumerate(shown, 1):
        groups.setdefault(item.binding, []).append(rank)
    return [f"{binding}: " + ", ".join(f"#{rank}" for rank in ranks) for binding, ranks in groups.items()]


def render_text(result, shown, closest, elapsed: float, width: int = 160, brief: bool = False, gpu=None) -> str:
    """The plan as text ``width`` columns wide: the answer first (how many
    layouts fit, the best one against the GPU), the assumptions, the table
    (a compact form below 160 columns)."""
    from ..core.units import fmt  # (core.numeric re-exports it, but imports sympy)
    from ..render.summary import lever_words, plan_summary, wrap

    model = result.model
    s = result.seq or model.seq
    out = plan_summary(json.loads(render_json(result, shown, closest, gpu)), width)
    fix = top_fix(result, closest) if not shown and closest is not None else ""
    if brief:
        return "\n".join(out + (wrap(fix, width, subsequent="  ") if fix else []))
    out.append("")
    out += wrap(f"{model.name} on {result.gpus} GPUs × {fmt(result.gpu_memory, 'GB')} "
                f"({fmt(result.gpu_memory, 'GiB')}), s = {s}, "
                + (f"global batch {result.global_batch}" if result.global_batch else "one micro-batch per DP rank")
                + (f", Psi = {result.params_hand:,} (hand-filled)" if result.params_hand else "")
                + f", {result.optimizer}, {result.dtype} activations"
                + (" (linear inputs in FP8)" if result.fp8_activations else "")
                + (", fused attention kernel" if result.flash_attention else "")
                + "".join(", " + words for words in lever_words(result.levers))
                + f", {result.loss} loss"
                + (f" ({result.loss_under_tp} under TP, as the bill's default)" if result.loss_under_tp else "")
                + f"; {margin_words(result.margin)}", width)
    out += wrap(f"{result.evaluated:,} valid layouts evaluated in {elapsed * 1e3:.0f} ms; {len(result.order):,} fit",
                width)
    for name, text in _assumptions(result).items():
        out += wrap(f"{name}: {text}", width, "  ", "      ")
    out += wrap("layouts: " + "; ".join(result.rules), width, "  ", "      ")
    out.append("")
    if not shown:
        out += wrap(f"NO LAYOUT FITS in {fmt(result.usable, 'GB')} per GPU.", width)
        if closest is not None:
            miss = -closest.headroom_bytes
            out += wrap(f"closest: {_describe(closest.layout)} needs {fmt(closest.totals['total_bytes'], 'GB')} "
                        f"(states {fmt(closest.totals['model_states_bytes'], 'GB')} + activations "
                        f"{fmt(closest.totals['activation_bytes'], 'GB')}): misses by {fmt(miss, 'GB')}", width)
        if fix:
            out += wrap(fix, width, subsequent="  ")
        return "\n".join(out)
    moe = bool(model.experts)  # the expert grid's columns, e and e_t, for a mixture of experts only
    listed = len(shown)
    shown, same = merge_identical(shown)  # a choice that changes no number: one row, and said so
    marks = {rank: {header for header, _ in choices} for rank, choices in same.items()}
    # The widest form that fits: every column; the binding constraint under the table; the compact columns.
    uneven = any(item.split for item in shown)  # the split's column, and its key under the table
    full = table_lines(shown, for_model(FULL, moe, uneven), marks)
    medium = table_lines(shown, for_model(FULL, moe, uneven)[:-1], marks)
    compact = table_lines(shown, for_model(COMPACT, moe, uneven), marks)
    if max(map(len, full)) <= width:
        out += full
    else:
        out += medium if max(map(len, medium)) <= width else compact if max(map(len, compact)) <= width else \
            block_lines(shown, for_model(COMPACT, moe, uneven), width)
        out += wrap("what limits each layout: " + "; ".join(_bindings(shown)), width, subsequent="  ")
    for line in same_lines(same):
        out += wrap(line, width, subsequent="  ")
    if len(result.order) > listed:
        out.append(f"... {len(result.order) - listed:,} more fit "
                   + (f"(at most {MAX_LISTED:,} are listed)" if listed == MAX_LISTED else "(--top 0 shows all)"))
    for line in reference_lines(result, shown):
        out += wrap(line, width, subsequent="  ")
    if uneven:
        out += wrap("split: layers on the first/each middle/the last stage (first/last at p = 2), Megatron-Core's "
                    "uneven stages — --decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers, "
                    "our --first-stage-layers and --last-stage-layers (--json: stage_layers)", width, subsequent="  ")
    out += wrap("m: micro-batches per pipeline per iteration; TFLOP/s and MFU: model FLOPs (no recompute) per GPU "
                "per second of the modelled step; exact values and the time breakdown: `symbolic bill MODEL` with "
                "the same options, or --json", width, subsequent="  ")
    return "\n".join(out)


def reference(result):
    """(rank from 1, Planned) of the best fitting layout of the papers' kind — t = the GPUs of one
    NVLink domain, pipelining across domains (Narayanan et al. 2021 §3.3, takeaway #1) — or None."""
    import numpy as np

    order = result.order  # the first such layout in rank order, found over the arrays (a frontier plan: 152,951 fit)
    hits = np.flatnonzero((result.table["tp"][order] == result.gpus_per_node) & (result.table["pp"][order] > 1))
    if not hits.size:
        return None
    return int(hits[0]) + 1, result.planned(int(order[hits[0]]))


def ahead_by(item, ref) -> list[tuple[str, float]]:
    """The parts of the step by which ``item`` beats ``ref`` (seconds saved, largest first; a plan
    compares layouts at one global batch)."""
    deltas = [(name, ref.time_breakdown[name] - item.time_breakdown[name]) for name in item.time_breakdown]
    return sorted((d for d in deltas if d[1] > 0), key=lambda d: -d[1])


def reference_lines(result, shown) -> list[str]:
    """The papers' layout and, for each layout shown above it, the figure that puts it there."""
    found = reference(result)
    if found is None:
        return [f"no fitting layout with t = {result.gpus_per_node} (one NVLink domain) and p > 1"]
    rank, ref = found
    out = [f"papers' kind of layout (t = {result.gpus_per_node} within an NVLink domain, p > 1): best is #{rank}, "
           f"{_describe(ref.layout)}, step {ref.step_seconds:.3f} s"]
    if rank <= len(shown):
        return out
    out.append("  each layout shown above it, and what puts it there (step seconds it saves against it):")
    for position, item in enumerate(shown, 1):
        gains = ", ".join(f"{name} {value:+.3f} s" for name, value in ahead_by(item, ref)[:3])
        losses = [(name, -value) for name, value in ((n, ref.time_breakdown[n] - item.time_breakdown[n])
                                                     for n in item.time_breakdown) if value < 0]
        worst = max(losses, key=lambda x: x[1]) if losses else None
        out.append(f"  #{position} {_describe(item.layout)}: {item.step_seconds:.3f} s vs {ref.step_seconds:.3f} s — "
                   f"saves {gains or 'nothing'}" + (f"; pays {worst[0]} +{worst[1]:.3f} s" if worst else ""))
    return out


def _gb(value) -> str:
    return _num(value, 10**9)


def _num(value, unit: int) -> str:
    from ..core.units import as_fraction, round_half_up  # exact, without sympy

    return f"{round_half_up(as_fraction(value) / unit, 2):,.2f}"


def _describe(layout) -> str:
    experts = f"e={layout.ep} e_t={layout.etp or layout.tp} " if layout.ep > 1 or layout.etp else ""
    split = "".join(f" --{name}-stage-layers {value}" for name, value in (
        ("first", layout.first_stage_layers), ("last", layout.last_stage_layers)) if value)
    schedule = f" {layout.schedule}" if layout.schedule and layout.pp > 1 else ""
    return (f"t={layout.tp} p={layout.pp} d={layout.dp} c={layout.cp} {experts}v={layout.interleave}{split}{schedule} "
            f"b={layout.micro_batch} ZeRO-{layout.zero}{' SP' if layout.sp else ''} {layout.recompute} recompute")


def render_json(result, shown, closest, gpu=None) -> str:
    import json

    from ..models.config import seq_origin

    data = {
        "model": result.model.name, "experts": result.model.experts or 0, "gpus": result.gpus, "gpu_memory_bytes": result.gpu_memory,
        "margin_bytes": result.margin, "usable_bytes": result.usable, "seq": result.seq or result.model.seq,
        "global_batch": result.global_batch, "params_hand": result.params_hand, "optimizer": result.optimizer,
        "dtype": result.dtype, "fp8_activations": result.fp8_activations,
        "flash_attention": result.flash_attention, "loss": result.loss, "loss_under_tp": result.loss_under_tp,
        "hardware": {"name": result.hardware.name, "peak_flops": result.hardware.peak_bf16_flops,
                     "gpus_per_node": result.gpus_per_node, "overlap": result.overlap.describe()},
        "assumptions": _assumptions(result), "rules": result.rules,
        **({"seq_from": seq_origin(result.model, result.seq_given)} if seq_origin(result.model, result.seq_given)
           else {}),
        **({"notes": list(result.notes)} if result.notes else {}),
        "evaluated": result.evaluated, "fitting": len(result.order),
        "layouts": [item.as_dict() for item in shown],
        "closest": closest.as_dict() if closest is not None else None,
    }
    if gpu is not None:  # which option set the memory and the hardware (--gpu, --gpu-memory, --hardware)
        data["gpu"] = gpu.as_dict()
    found = reference(result) if shown else None
    if found is not None:
        rank, ref = found
        data["reference"] = {"rank": rank, "layout": ref.as_dict(),
                             "ahead_by": [dict(ahead_by(item, ref)) for item in shown[:rank - 1]]}
    # never Infinity/NaN (not JSON): a time the model did not price (a layout that does not fit) is null
    return json.dumps(_finite(data), indent=2, allow_nan=False)


def _finite(value):
    """``value`` with every non-finite float replaced by None, recursively."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value
