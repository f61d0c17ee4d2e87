"""``symbolic timeline MODEL [layout options]``: memory over one training step.

The four lifetime classes instant by instant, the peak expression, the peak
value and its phase t*, the reserved memory of the caching-allocator model;
``--png`` draws it (seed 004 §04.2), ``--json`` prints exact integers.
"""
from __future__ import annotations

from . import _gpu, _options

HELP = "memory over one training step: the four lifetime classes per instant, the peak and its phase t*"


def add_arguments(parser) -> None:
    _options.add_model_argument(parser, optional=True)
    _options.add_from_option(parser)
    _options.add_layout_options(parser)
    _options.add_pipeline_layout_option(parser)
    _options.add_sweep_lever_options(parser)  # LoRA, QLoRA's base, offload, activation offload (the bill's)
    parser.add_argument("--optimize", action="append", default=[], metavar="NAME",
                        help="apply an optimisation (repeatable): zero, fp8-weights, fp8-optimizer, optimizer-offload, "
                             "activation-offload, fp8-activations, flash-attention, fused-cross-entropy")
    parser.add_argument("--gpu-memory", metavar="SIZE", help="memory per GPU to compare against (80GB, 80GiB, or "
                        "a GPU's name)")
    _gpu.add_gpu_option(parser)
    parser.add_argument("--stage", choices=("first", "last"), default="first",
                        help="pipeline stage: first (most micro-batches in flight) or last (the output side and loss)")
    parser.add_argument("--nccl-buffsize", metavar="SIZE", default="4MiB", help="NCCL_BUFFSIZE per channel (4MiB)")
    parser.add_argument("--nccl-channels", type=_options.bounded_int(1, 1024), default=16, metavar="N", help="NCCL channels per communicator (16)")
    parser.add_argument("--bucket", metavar="SIZE", default="25MiB", help="gradient bucket, data parallel (25MiB)")
    parser.add_argument("--png", metavar="FILE", help="draw the timeline and the peak breakdown (needs matplotlib)")
    parser.add_argument("--json", action="store_true", help="exact integers under stable keys")
    parser.add_argument("--brief", action="store_true", help="the answer alone: the peak against the GPU")


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
    out["layout"]["seq"] = layout.seq or model.seq
    if seq_origin(model, layout.seq):  # s was not given: where it comes from (the layout line says it)
        out["layout"]["seq_from"] = seq_origin(model, layout.seq)
    if gpu_memory:
        out["gpu_memory_bytes"] = gpu_memory
        out["headroom_bytes"] = gpu_memory - result.peak
        out["fits"] = result.peak <= gpu_memory and max(reserved) <= gpu_memory
    return out, tl, result, reserved


def run(args) -> int:
    import json

    from ..step.optimizations import apply
    from ..step.timeline import CommSettings, MemoryOptions

    if args.png is not None:
        _options.check_output(args.png, "--png")
    model = _options.load_model(args)
    layout = _options.layout_from_args(args, model)
    comm = CommSettings(_options.parse_memory(args.nccl_buffsize, "--nccl-buffsize"), args.nccl_channels,
                        _options.parse_memory(args.bucket, "--bucket"))
    layout, options = apply(args.optimize, layout, MemoryOptions(comm=comm))
    gpu = _gpu.from_args(args)
    gpu_memory = gpu.memory
    data, tl, result, reserved = report(model, layout, options, gpu_memory, getattr(args, "stage", "first"))
    data["gpu"] = gpu.as_dict()
    if args.png is not None:
        from ..render.memory_plot import timeline_figure, use_file_backend
        use_file_backend()
        fig = timeline_figure(result, reserved, f"{model.name}: {tl.strategy.describe()}", gpu_memory)
        _options.write_figure(fig, args.png, "--png")
    if args.json:
        print(json.dumps(data, indent=1))
        return 0

    from ..render.terminal import output_width

    print(render_text(data, tl.strategy.describe(), output_width(), args.brief, args.png))
    return 0


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
    lines += [f"  note: {note}" for note in data["notes"]]
    if png:
        lines.append(f"  drawn: {png}")
    out.append("")
    for line in lines:
        indent = line[: len(line) - len(line.lstrip())]
        out += wrap(line.strip(), width, indent, indent + "    ")
    return "\n".join(out)
