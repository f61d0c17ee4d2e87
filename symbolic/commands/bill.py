"""``symbolic bill MODEL [layout options]``: the four ledgers, itemised, and the step time.

The derivation is cached (``symbolic.bill.cache``): a bill of a kind already seen
is evaluated from its stored formulas without importing sympy.
"""
from __future__ import annotations

from . import _gpu, _options

HELP = "print the four ledgers (params, model states, activations, FLOPs) of a model under a layout"


def add_arguments(parser) -> None:
    _options.add_model_argument(parser, optional=True)
    _options.add_from_option(parser)
    _options.add_layout_options(parser)
    _options.add_pipeline_layout_option(parser)
    _options.add_schedule_option(parser)
    _options.add_lever_options(parser)
    parser.add_argument("--cpu-memory", metavar="SIZE", help="CPU memory per GPU's process, for what is offloaded")
    parser.add_argument("--params", metavar="N", help="hand-filled parameter count for the model states (7B, 175e9)")
    parser.add_argument("--gpu-memory", metavar="SIZE", help="memory per GPU to compare against (80GB, 80GiB, "
                        "or a GPU's name: its memory and its hardware, as --gpu)")
    _gpu.add_gpu_option(parser)
    parser.add_argument("--json", action="store_true", help="exact integers under stable keys")
    _options.add_time_options(parser)
    _options.add_framework_option(parser)
    parser.add_argument("--brief", action="store_true", help="the summary alone: verdict, total, dominant term")


def run(args) -> int:
    import json

    from ..bill.priced import priced_bill
    from ..render.time import time_json, time_lines

    model = _options.load_model(args)
    layout = _options.apply_framework(_options.layout_from_args(args, model), args, model=model).validate(model)
    params_hand = _options.parse_count(args.params) if args.params is not None else None
    gpu = _gpu.from_args(args)  # --gpu, --gpu-memory, --hardware: the memory and the step-time hardware
    cpu_memory = _options.parse_memory(args.cpu_memory, "--cpu-memory") if args.cpu_memory is not None else None
    _, overlap, gpus_per_node = _options.time_options(args)
    bill, step = priced_bill(model, layout, gpu.hardware, overlap=overlap, gpus_per_node=gpus_per_node,
                             params_hand=params_hand, gpu_memory=gpu.memory, cpu_memory=cpu_memory)
    bill.gpu = gpu
    bill.preset = getattr(args, "_preset", None)  # what --framework filled: the layout line names it
    _options.framework_factors(step, args)
    _options.flush_notes()   # every input read and priced: the no-op notes now, above the bill
    if args.json:  # (render/bill_json.py: the data without the tables' library)
        from ..render.bill_json import bill_data

        print(json.dumps(dict(bill_data(bill), **time_json(step)), indent=2, ensure_ascii=False))
    else:
        from ..render.summary import wrap_lines
        from ..render.terminal import output_width, print_text

        print_text(bill, brief=args.brief, extra=time_json(step))
        if not args.brief:  # the TIME section, each line wrapped to the terminal
            print()
            print("\n".join(wrap_lines("\n".join(time_lines(step, bill)), output_width())))
    return 0
