"""``timeline``'s output: the data of memory over one step (:func:`report`) and its text — what
``symbolic timeline`` prints and ``symbolic.timeline()`` returns (below the commands: both use it)."""
from __future__ import annotations


def report(model, layout, options, gpu_memory=None, stage: str = "first") -> dict:
    """Everything the command prints, as plain data (exact integers), for pipeline ``stage``."""
    from sympy import sstr

    from ..models.config import seq_origin
    from ..step import timeline as T

    tl = T.build(model, layout, options, stage=stage)
    result = tl.evaluate()
    reserved = tl.reserved()
    values = tl.values()
    from ..core.numeric import exact_int
    out = {
        "model": model.name,
        "layout": {k: getattr(layout, k) for k in ("micro_batch", "seq", "tp", "pp", "dp", "sp", "recompute", "zero",
                                                   "optimizer", "interleave", "dtype", "global_batch",
                                                   "loss")},
        "optimizations": list(options.applied), "stage": stage,
        "in_flight": sstr(tl.in_flight), "layers_per_chunk": sstr(tl.layers),
        "peak_expression": sstr(tl.peak_expression()),
        "candidates": [{"instant": label, "expression": sstr(expr), "bytes": exact_int(expr, values)}
                       for label, expr in tl.candidates()],
        "peak_bytes": result.peak, "t_star": result.t_star,
        "peak_by_class": result.peak_by_class(),
        "peak_breakdown": [{"class": c, "name": n, "bytes": v} for c, n, v in result.breakdown],
        "sum_of_class_maxima_bytes": T.sum_of_class_maxima(result),
        "reserved_max_bytes": max(reserved), "reserved_at_t_star_bytes": reserved[result.t_star_index],
        "instants": [{"instant": label, **row, "reserved": r} for (label, row), r in zip(result.rows, reserved)],
        "notes": tl.notes,
    }
    if layout.pp > 1:
        out["layout"]["schedule"] = layout.schedule_name
        out["schedule_order"] = schedule_order(layout, stage)
    out["layout"]["seq"] = layout.seq or model.seq
    out["layout"].update(layout.memory_levers())  # the memory levers, when set (the layout line says them)
    if seq_origin(model, layout.seq):  # s was not given: where it comes from (the layout line says it)
        out["layout"]["seq_from"] = seq_origin(model, layout.seq)
    if gpu_memory:
        out["gpu_memory_bytes"] = gpu_memory
        out["headroom_bytes"] = gpu_memory - result.peak
        out["fits"] = result.peak <= gpu_memory and max(reserved) <= gpu_memory
    return out, tl, result, reserved


def schedule_order(layout, stage="first") -> dict:
    """The pipeline rank of ``stage`` and its ops in the schedule's own order (``layout.schedules.order``):
    ``F3`` forward of micro-batch 3, ``B3`` its backward (input gradient where a ``W3`` follows, else the
    whole backward), ``W3`` its weight gradient; ``.1`` the rank's second chunk; ``&`` an op run as one
    of an overlapped F&B pair (DualPipe)."""
    from ..layout import schedules
    from ..layout.stages import stage_key_rank

    rank = int(stage) if str(stage).isdigit() else stage_key_rank(str(stage), layout.pp)
    plan = layout.pipeline_schedule()
    m = layout.iteration_micro_batches()
    ops = schedules.order(plan, layout.pp, layout.interleave, m, rank)
    chunks = schedules.chunks_of(plan, layout.interleave)
    words = [f"{kind}{mb}" + (f".{chunk}" if chunks > 1 or plan.placement == "dual" else "") + ("&" if paired else "")
             for kind, mb, chunk, paired in ops]
    live = schedules.live_counts(ops)
    return {"schedule": plan.name, "rank": rank, "ops": words, "most_in_flight": max(live),
            "source": plan.source}


def render_text(data: dict, strategy: str, width: int = 160, brief: bool = False, png: str | None = None) -> str:
    """The timeline's answer first (peak against the GPU, its phase, the
    dominant class), then the details, wrapped to ``width`` columns."""
    from ..core.units import fmt_bytes
    from ..render.summary import timeline_summary, wrap

    out = timeline_summary(data, width)
    if brief:
        return "\n".join(out)
    lines = [f"{data['model']}: {strategy}",
             f"  in flight: {data['in_flight']} chunk(s) of {data['layers_per_chunk']} layers"
             + (f"; optimisations: {', '.join(data['optimizations'])}" if data["optimizations"] else ""),
             "  peak = max over instants of (constant + activations + transients + communication)",
             f"       = {data['peak_expression']}",
             "  candidates (each phase family at its largest end):"]
    label = max((len(c["instant"]) for c in data["candidates"]), default=0)
    lines += [f"    {c['instant']:<{label}}  {fmt_bytes(c['bytes'])}" for c in data["candidates"]]
    lines.append(f"  PEAK {fmt_bytes(data['peak_bytes'])} at t* = {data['t_star']}")
    lines += [f"    {cls:<14} {fmt_bytes(size):>22}" for cls, size in data["peak_by_class"].items()]
    lines.append(f"  sum of the classes' own maxima: {fmt_bytes(data['sum_of_class_maxima_bytes'])} (not the peak)")
    lines.append(f"  reserved (caching-allocator model): {fmt_bytes(data['reserved_max_bytes'])} at most, "
                 f"{fmt_bytes(data['reserved_at_t_star_bytes'])} at t*")
    if data.get("gpu_memory_bytes"):
        lines.append(f"  GPU memory {fmt_bytes(data['gpu_memory_bytes'])}: headroom {fmt_bytes(data['headroom_bytes'])}"
                     + ("" if data["fits"] else "  — DOES NOT FIT"))
    order = data.get("schedule_order")
    if order:
        ops = order["ops"]
        shown = " ".join(ops) if len(ops) <= 72 else (" ".join(ops[:48]) + f" … ({len(ops) - 72} ops) … "
                                                       + " ".join(ops[-24:]))
        lines.append(f"  schedule {order['schedule']}, rank {order['rank']}'s order ({len(ops)} ops; F forward, B "
                     f"backward — the input gradient where a W follows —, W weight gradient, .c the rank's chunk c, & an "
                     f"overlapped F&B pair; {order['most_in_flight']} chunk instance(s) held at most): {shown}")
        lines.append(f"    from {order['source']}")
    lines += [f"  note: {note}" for note in data["notes"]]
    if png:
        lines.append(f"  drawn: {png}")
    out.append("")
    for line in lines:
        indent = line[: len(line) - len(line.lstrip())]
        out += wrap(line.strip(), width, indent, indent + "    ")
    return "\n".join(out)
