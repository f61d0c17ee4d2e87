"""``symbolic bill MODEL [layout options]``: the four ledgers, itemised.

The derivation is cached (``symbolic.bill.cache``): a bill of a kind already seen
is evaluated from its stored formulas without importing sympy.
"""
from __future__ import annotations

from . import _options

HELP = "print the four ledgers (params, model states, activations, FLOPs) of a model under a layout"


def add_arguments(parser) -> None:
    _options.add_model_argument(parser)
    _options.add_layout_options(parser)
    _options.add_lever_options(parser)
    parser.add_argument("--cpu-memory", metavar="SIZE", help="CPU memory per GPU's process, for what is offloaded")
    parser.add_argument("--params", metavar="N", help="hand-filled parameter count for the model states (7B, 175e9)")
    parser.add_argument("--gpu-memory", metavar="SIZE", help="memory per GPU to compare against (80GB, 80GiB)")
    parser.add_argument("--json", action="store_true", help="exact integers under stable keys")


def run(args) -> int:
    from ..bill.cache import derivation
    from ..bill.evaluate import evaluate
    from ..render.terminal import print_text, render_json

    model = _options.load_model(args)
    layout = _options.layout_from_args(args).validate(model)
    params_hand = _options.parse_count(args.params) if args.params else None
    gpu_memory = _options.parse_memory(args.gpu_memory) if args.gpu_memory else None
    cpu_memory = _options.parse_memory(args.cpu_memory, "--cpu-memory") if args.cpu_memory else None
    bill = evaluate(derivation(model, layout, params_hand), model, layout, params_hand, gpu_memory, cpu_memory)
    from ..bill.levers import POLICY, what_would_fit

    bill.fixes = what_would_fit(bill, params_hand)  # empty when it fits (or no --gpu-memory)
    bill.fix_policy = POLICY
    if args.json:
        print(render_json(bill))
    else:
        print_text(bill)
    return 0
