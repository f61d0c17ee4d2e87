"""``symbolic solve MODEL --max micro-batch|seq --gpu-memory 80GB [layout options]``:
the largest micro-batch or sequence length that fits, solved exactly and checked by the bill."""
from __future__ import annotations

from . import _gpu, _options
from ..render.solve import render_json, render_text  # (render/solve.py: the API renders with them too)

HELP = "solve the memory inequality for the largest micro-batch or sequence length that fits"

_TARGETS = {"micro-batch": "micro_batch", "seq": "seq"}


def add_arguments(parser) -> None:
    _options.add_model_argument(parser, optional=True)
    _options.add_from_option(parser)
    parser.add_argument("--max", required=True, choices=sorted(_TARGETS),
                        help="what to maximise (its own layout option, if given, is ignored)")
    _options.add_layout_options(parser)
    _options.add_schedule_option(parser)
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
    _options.add_framework_option(parser)  # the preset's memory fields (attention, ZeRO, loss, main grads)


def run(args) -> int:
    from ..search.solve import solve_limit
    from .plan import parse_margin, required_gpu

    model = _options.load_model(args)
    layout = _options.apply_framework(_options.layout_from_args(args, model), args, overlap=False, model=model)
    gpu = required_gpu(args)
    gpu_memory = gpu.memory
    margin = parse_margin(args.margin, gpu_memory)
    params_hand = _options.parse_count(args.params) if args.params is not None else None
    limit = solve_limit(model, layout, _TARGETS[args.max], gpu_memory, margin, params_hand)
    if args.json:
        print(render_json(limit, gpu, getattr(args, "_preset", None)))
    else:
        from ..render.terminal import output_width

        print(render_text(limit, output_width(), args.brief, gpu, getattr(args, "_preset", None)))
    return 0 if limit.answer is not None else 1


