"""``symbolic solve MODEL --max micro-batch|seq --gpu-memory 80GB [layout options]``:
the largest micro-batch or sequence length that fits, solved exactly and checked by the bill."""
from __future__ import annotations

from . import _gpu, _options

HELP = "solve the memory inequality for the largest micro-batch or sequence length that fits"

_TARGETS = {"micro-batch": "micro_batch", "seq": "seq"}


def add_arguments(parser) -> None:
    _options.add_model_argument(parser, optional=True)
    _options.add_from_option(parser)
    parser.add_argument("--max", required=True, choices=sorted(_TARGETS),
                        help="what to maximise (its own layout option, if given, is ignored)")
    _options.add_layout_options(parser)
    _options.add_sweep_lever_options(parser)
    parser.add_argument("--optimizer-impl", choices=("foreach", "fused"), default="foreach",
                        help="foreach: PyTorch's default step (fp32 temporaries of the shard); fused: FusedAdam (none)")
    parser.add_argument("--params", metavar="N", help="hand-filled parameter count for the model states (7B, 175e9)")
    parser.add_argument("--gpu-memory", metavar="SIZE", help="memory per GPU (80GB, 80GiB, or a GPU's name); this "
                        "or --gpu is required")
    _gpu.add_gpu_option(parser)
    from .plan import add_margin_option
    add_margin_option(parser)
    parser.add_argument("--json", action="store_true", help="the answer and the inequality it solved, as JSON")
    parser.add_argument("--brief", action="store_true", help="the answer alone: the largest value and its check")


def run(args) -> int:
    from ..search.solve import solve_limit
    from .plan import parse_margin, required_gpu

    model = _options.load_model(args)
    layout = _options.layout_from_args(args, model)
    gpu = required_gpu(args)
    gpu_memory = gpu.memory
    margin = parse_margin(args.margin, gpu_memory)
    params_hand = _options.parse_count(args.params) if args.params is not None else None
    limit = solve_limit(model, layout, _TARGETS[args.max], gpu_memory, margin, params_hand)
    if args.json:
        print(render_json(limit, gpu))
    else:
        from ..render.terminal import output_width

        print(render_text(limit, output_width(), args.brief, gpu))
    return 0 if limit.answer is not None else 1


def _layout_words(layout) -> str:
    return (f"t={layout.tp} p={layout.pp} d={layout.dp} v={layout.interleave}"
            + (" SP" if layout.sp else "") + (f" c={layout.cp}" if layout.cp > 1 else "")
            + (f" e={layout.ep} e_t={layout.etp or layout.tp}" if layout.ep > 1 or layout.etp else "")
            + f", {'no' if layout.recompute == 'none' else layout.recompute} recompute, ZeRO-{layout.zero}, "
            f"{layout.optimizer}, {layout.dtype} activations"
            + (f", global batch {layout.global_batch}" if layout.global_batch else ""))


def render_text(limit, width: int = 160, brief: bool = False, gpu=None) -> str:
    """The answer first (the largest value, checked by the bill), then the
    inequality it solved, wrapped to ``width`` columns."""
    import json

    from ..render.summary import solve_summary, wrap

    head = solve_summary(json.loads(render_json(limit, gpu)), width)
    if brief:
        return "\n".join(head)
    body = _details(limit).split("\n")
    return "\n".join(head + [""] + [piece for line in body for piece in wrap(line, width, subsequent="      ")])


def _details(limit) -> str:
    from sympy import sstr

    from ..core.numeric import fmt
    from .plan import margin_words

    sym = limit.symbol.name
    lay = limit.layout
    fixed = f"s = {lay.seq or limit.model.seq}" if limit.target == "micro_batch" else f"b = {lay.micro_batch}"
    out = [f"{limit.model.name}: {_layout_words(lay)}, {fixed}"
           + (f", Psi = {limit.params_hand:,} (hand-filled)" if limit.params_hand else ", Psi = config count"),
           f"memory per GPU = the step's peak on the busiest GPU, binding at {limit.instant or 'its peak'}: "
           f"{sstr(limit.symbolic)}",
           f"solved: {limit.inequality()}   (bytes; {fmt(limit.usable, 'GB')} = {fmt(limit.gpu_memory, 'GB')}"
           + (f" − {margin_words(limit.margin)})" if limit.margin else ", no margin)")]
    if limit.root is not None:
        out.append(f"  {sym} ≤ {sstr(limit.root)} ≈ {float(limit.root):.4f}; largest integer {limit.bound}")
    if limit.answer is None:
        out.append(f"NOTHING FITS: the smallest valid {sym} = {getattr(lay, limit.target)} needs "
                   f"{fmt(limit.total_at_answer, 'GB')}, over by {fmt(limit.total_at_answer - limit.usable, 'GB')}")
        return "\n".join(out)
    step = "" if limit.answer == limit.bound else f" (the largest valid value: {_why(limit)})"
    out.append(f"largest {limit.target.replace('_', '-')}: {sym} = {limit.answer}{step}")
    out.append(f"check (bill): {sym} = {limit.answer}: {fmt(limit.total_at_answer, 'GB')}, "
               + ("fits" if limit.answer_fits() else "DOES NOT FIT")
               + f", headroom {fmt(limit.usable - limit.total_at_answer, 'GB')}")
    if limit.next_value is None:
        out.append(f"  no larger valid {sym} exists for this layout")
    else:
        out.append(f"  {sym} = {limit.next_value}: {fmt(limit.total_at_next, 'GB')}, "
                   + ("FITS (check failed)" if limit.next_fits() else "does not fit")
                   + f", over by {fmt(limit.total_at_next - limit.usable, 'GB')}")
    return "\n".join(out)


def _why(limit) -> str:
    lay = limit.layout
    table = limit.model.position_table
    if limit.target == "seq" and table and limit.answer is not None and limit.answer + _step_of(lay) > table:
        return f"the learned position table has {table} rows, n_positions"
    if limit.target == "seq" and lay.cp > 1:
        return (f"s must be a multiple of t·c = {lay.tp}·{lay.cp} under sequence and context parallelism" if lay.sp
                else f"s must be a multiple of c = {lay.cp} under context parallelism")
    if limit.target == "seq" and lay.sp:
        return f"s must be a multiple of t = {lay.tp} under sequence parallelism"
    if limit.target == "micro_batch" and lay.global_batch:
        return f"b·d must divide the global batch {lay.global_batch}"
    return "the layout's divisibility rules"


def _step_of(layout) -> int:
    """Valid sequence lengths are multiples of this (c; t·c under SP)."""
    return layout.cp * (layout.tp if layout.sp else 1)


def render_json(limit, gpu=None) -> str:
    import json

    from sympy import sstr

    lay = limit.layout

    def num(value):
        from sympy import Rational

        if value is None:
            return None
        value = Rational(value)
        return int(value) if value.is_Integer else f"{value.p}/{value.q}"

    from ..layout.layout import Layout
    from ..models.config import seq_origin

    data = {
        "model": limit.model.name, "target": limit.target, limit.target: limit.answer,
        "inequality": limit.inequality(),
        "memory_per_gpu": sstr(limit.symbolic),
        "binding_instant": limit.instant,
        "root": None if limit.root is None else sstr(limit.root),
        "root_value": None if limit.root is None else float(limit.root),
        "largest_integer": limit.bound,
        "gpu_memory_bytes": limit.gpu_memory, "margin_bytes": limit.margin, "usable_bytes": limit.usable,
        "params_hand": limit.params_hand,
        "layout": {"micro_batch": lay.micro_batch, "seq": lay.seq or limit.model.seq, "tp": lay.tp, "pp": lay.pp,
                   "dp": lay.dp, "sp": lay.sp, "recompute": lay.recompute, "zero": lay.zero,
                   "optimizer": lay.optimizer, "interleave": lay.interleave, "dtype": lay.dtype,
                   "global_batch": lay.global_batch, "cp": lay.cp, "loss": lay.loss},
        "check": {"value": getattr(lay, limit.target) or None, "total_bytes": num(limit.total_at_answer),
                  "fits": limit.answer_fits(), "next_value": limit.next_value,
                  "next_total_bytes": num(limit.total_at_next), "next_fits": limit.next_fits()},
    }
    plain = Layout()
    for name in _options.SWEEP_LEVERS + ("double_quant",):  # the memory levers, when set (the layout line says them)
        if getattr(lay, name) != getattr(plain, name):
            data["layout"][name] = getattr(lay, name)
    if limit.target == "seq" and limit.model.max_positions:  # the config's position table (RoPE: its trained range)
        data["max_positions"] = limit.model.max_positions
    if limit.target != "seq" and seq_origin(limit.model, lay.seq):  # s not given: where it comes from
        data["layout"]["seq_from"] = seq_origin(limit.model, lay.seq)
    if gpu is not None:  # which option set the memory (--gpu, --gpu-memory)
        data["gpu"] = gpu.as_dict()
    return json.dumps(data, indent=2, allow_nan=False)  # never Infinity/NaN: not JSON
