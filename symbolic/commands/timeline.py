"""``symbolic timeline MODEL [layout options]``: memory over one training step.

The four lifetime classes instant by instant, the peak expression, the peak
value and its phase t*, the reserved memory of the caching-allocator model;
``--png`` draws it (seed 004 §04.2), ``--json`` prints exact integers.
"""
from __future__ import annotations

from . import _options

HELP = "memory over one training step: the four lifetime classes per instant, the peak and its phase t*"


def add_arguments(parser) -> None:
    _options.add_model_argument(parser)
    _options.add_layout_options(parser)
    parser.add_argument("--optimize", action="append", default=[], metavar="NAME",
                        help="apply an optimisation (repeatable): zero, fp8-weights, fp8-optimizer, optimizer-offload, "
                             "activation-offload, fp8-activations, flash-attention, fused-cross-entropy")
    parser.add_argument("--gpu-memory", metavar="SIZE", help="memory per GPU to compare against (80GB, 80GiB)")
    parser.add_argument("--stage", choices=("first", "last"), default="first",
                        help="pipeline stage: first (most micro-batches in flight) or last (the output side and loss)")
    parser.add_argument("--nccl-buffsize", metavar="SIZE", default="4MiB", help="NCCL_BUFFSIZE per channel (4MiB)")
    parser.add_argument("--nccl-channels", type=int, default=16, metavar="N", help="NCCL channels per communicator (16)")
    parser.add_argument("--bucket", metavar="SIZE", default="25MiB", help="gradient bucket, data parallel (25MiB)")
    parser.add_argument("--png", metavar="FILE", help="draw the timeline and the peak breakdown (needs matplotlib)")
    parser.add_argument("--json", action="store_true", help="exact integers under stable keys")


def report(model, layout, options, gpu_memory=None, stage: str = "first") -> dict:
    """Everything the command prints, as plain data (exact integers), for pipeline ``stage``."""
    from sympy import sstr

    from ..step import timeline as T

    tl = T.build(model, layout, options, stage=stage)
    result = tl.evaluate()
    reserved = tl.reserved()
    values = tl.values()
    from ..core.numeric import exact_int
    out = {
        "model": model.name,
        "layout": {k: getattr(layout, k) for k in ("micro_batch", "seq", "tp", "pp", "dp", "sp", "recompute", "zero",
                                                   "optimizer", "interleave", "dtype", "global_batch")},
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
    if gpu_memory:
        out["gpu_memory_bytes"] = gpu_memory
        out["headroom_bytes"] = gpu_memory - result.peak
        out["fits"] = result.peak <= gpu_memory and max(reserved) <= gpu_memory
    return out, tl, result, reserved


def run(args) -> int:
    import json

    from ..core.units import fmt_bytes
    from ..models.config import ConfigError
    from ..step.optimizations import apply
    from ..step.timeline import CommSettings, MemoryOptions

    model = _options.load_model(args)
    layout = _options.layout_from_args(args)
    if args.nccl_channels <= 0:
        raise ConfigError("--nccl-channels must be a positive integer")
    comm = CommSettings(_options.parse_memory(args.nccl_buffsize, "--nccl-buffsize"), args.nccl_channels,
                        _options.parse_memory(args.bucket, "--bucket"))
    layout, options = apply(args.optimize, layout, MemoryOptions(comm=comm))
    gpu_memory = _options.parse_memory(args.gpu_memory) if args.gpu_memory else None
    data, tl, result, reserved = report(model, layout, options, gpu_memory, getattr(args, "stage", "first"))
    if args.png:
        from ..render.memory_plot import timeline_figure, use_file_backend
        use_file_backend()
        fig = timeline_figure(result, reserved, f"{model.name}: {tl.strategy.describe()}", gpu_memory)
        fig.savefig(args.png, dpi=110)
    if args.json:
        print(json.dumps(data, indent=1))
        return 0

    print(f"{model.name}: {tl.strategy.describe()}")
    print(f"  in flight: {data['in_flight']} chunk(s) of {data['layers_per_chunk']} layers"
          + (f"; optimisations: {', '.join(options.applied)}" if options.applied else ""))
    print("  peak = max over instants of (constant + activations + transients + communication)")
    print(f"       = {data['peak_expression']}")
    print("  candidates (each phase family at its largest end):")
    for c in data["candidates"]:
        print(f"    {c['instant']:<28} {fmt_bytes(c['bytes']):>34}")
    print(f"  PEAK {fmt_bytes(result.peak)} at t* = {result.t_star}")
    for cls, size in data["peak_by_class"].items():
        print(f"    {cls:<14} {fmt_bytes(size):>34}")
    print(f"  sum of the classes' own maxima: {fmt_bytes(data['sum_of_class_maxima_bytes'])} (not the peak)")
    print(f"  reserved (caching-allocator model): {fmt_bytes(data['reserved_max_bytes'])} at most, "
          f"{fmt_bytes(data['reserved_at_t_star_bytes'])} at t*")
    if gpu_memory:
        print(f"  GPU memory {fmt_bytes(gpu_memory)}: headroom {fmt_bytes(data['headroom_bytes'])}"
              + ("" if data["fits"] else "  — DOES NOT FIT"))
    for note in data["notes"]:
        print(f"  note: {note}")
    if args.png:
        print(f"  drawn: {args.png}")
    return 0
