"""``symbolic snapshot FILE.pickle [--compare MODEL [layout options]]``.

Reads a ``torch.cuda.memory._dump_snapshot`` file with a restricted
unpickler (no class is ever loaded): allocated and reserved over time, the
peak and its breakdown by lifetime class, fragmentation at the peak, any
OOM's case A/B (seed 004 §04). With ``--compare`` the engine's timeline of
MODEL under the layout is lined up against the measurement, class by class.
"""
from __future__ import annotations

from . import _options

HELP = "read a torch.cuda.memory snapshot: allocated/reserved over time, the peak by lifetime class, OOM case A/B"


def add_arguments(parser) -> None:
    parser.add_argument("file", help="a pickle written by torch.cuda.memory._dump_snapshot (optionally gzipped)")
    parser.add_argument("--device", type=_options.bounded_int(0, 4096), default=None, help="device index (default: the busiest trace)")
    parser.add_argument("--transient-allocs", type=_options.bounded_int(0, 10**9), default=16, metavar="N",
                        help="an allocation freed within N further allocations counts as a kernel transient (16)")
    parser.add_argument("--compare", metavar="MODEL", help="line the engine's timeline of MODEL up against the file")
    _options.add_layout_options(parser)
    parser.add_argument("--png", metavar="FILE", help="draw allocated/reserved over the trace (needs matplotlib)")
    parser.add_argument("--json", action="store_true", help="exact integers under stable keys")


def summarise(analysis) -> dict:
    return {
        "device": analysis.device, "events": analysis.events, "main_stream": analysis.main_stream,
        "peak_index": analysis.peak_index, "peak_allocated_bytes": analysis.peak_allocated,
        "peak_reserved_bytes": analysis.peak_reserved, "max_reserved_bytes": analysis.max_reserved,
        "peak_by_class": analysis.breakdown,
        "fragmentation_bytes": analysis.fragmentation, "largest_free_gap_bytes": analysis.largest_free_gap,
        "top_allocations": [{"addr": r.addr, "bytes": r.size, "class": r.cls, "stream": r.stream,
                             "frame": (f"{r.frames[0].get('filename', '')}:{r.frames[0].get('line', '')}:"
                                       f"{r.frames[0].get('name', '')}" if r.frames and isinstance(r.frames[0], dict)
                                       else "")}
                            for r in analysis.peak_allocations[:10]],
        "ooms": [{"index": i, "case": d.case, "request_bytes": d.request, "message": d.message}
                 for i, d in analysis.ooms],
        "notes": analysis.notes,
    }


def _run(args) -> int:
    import json

    from ..core.units import fmt, fmt_bytes
    from ..core.inputs import clean
    from ..step.snapshot import analyse, load

    if args.png is not None:
        _options.check_output(args.png, "--png")
    analysis = analyse(load(args.file), args.device, args.transient_allocs)
    data = summarise(analysis)
    if args.compare:
        from ..step.timeline import MemoryOptions
        from ..render.timeline import report
        model = _options.model_from_text(args.compare)
        engine, _, result, _ = report(model, _options.layout_from_args(args, model), MemoryOptions())
        data["compare"] = {"model": model.name, "t_star": result.t_star,
                           "classes": {cls: {"engine_bytes": engine["peak_by_class"][cls],
                                             "measured_bytes": analysis.breakdown[cls]}
                                       for cls in analysis.breakdown},
                           "engine_peak_bytes": result.peak, "measured_peak_bytes": analysis.peak_allocated}
    if args.png is not None:
        from ..render.memory_plot import snapshot_figure, use_file_backend
        use_file_backend()
        _options.write_figure(snapshot_figure(analysis, clean(args.file)), args.png, "--png")
    if args.json:
        print(json.dumps(data, indent=1))
        return 0

    print(f"{clean(args.file)}: device {analysis.device}, {analysis.events} trace events, main stream {analysis.main_stream}")
    print(f"  peak allocated {fmt_bytes(analysis.peak_allocated)} at event {analysis.peak_index}; "
          f"reserved then {fmt_bytes(analysis.peak_reserved)}, at most {fmt_bytes(analysis.max_reserved)}")
    for cls, size in analysis.breakdown.items():
        print(f"    {cls:<14} {fmt_bytes(size):>34}")
    print(f"  fragmentation at the peak: reserved - allocated = {fmt_bytes(analysis.fragmentation)}; "
          f"largest free gap {fmt_bytes(analysis.largest_free_gap)}")
    for index, diagnosis in analysis.ooms:
        print(f"  OOM at event {index}: {diagnosis.message}")
    if not analysis.ooms:
        print("  no OOM recorded")
    if args.compare:
        cmp = data["compare"]
        print(f"  compared with the engine's timeline of {cmp['model']} (t* = {cmp['t_star']}):")
        print(f"    {'class':<14} {'engine':>22} {'measured':>22}")
        for cls, row in cmp["classes"].items():
            print(f"    {cls:<14} {fmt(row['engine_bytes'], 'GiB'):>22} {fmt(row['measured_bytes'], 'GiB'):>22}")
        print(f"    {'peak':<14} {fmt(cmp['engine_peak_bytes'], 'GiB'):>22} {fmt(cmp['measured_peak_bytes'], 'GiB'):>22}")
    for note in analysis.notes:
        print(f"  note: {note}")
    return 0


def run(args) -> int:
    """The command, its plain lines wrapped to the terminal's width (JSON as is)."""
    from ..render.terminal import run_wrapped

    return run_wrapped(_run, args)
