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
    parser.add_argument("--params", metavar="N", help="hand-filled parameter count for the model states (7B, 175e9)")
    parser.add_argument("--gpu-memory", metavar="SIZE", help="memory per GPU to compare against (80GB, 80GiB)")
    parser.add_argument("--json", action="store_true", help="exact integers under stable keys")


def run(args) -> int:
    from ..bill.cache import derivation
    from ..bill.evaluate import evaluate
    from ..render.terminal import print_text, render_json

    model = _options.load_model(args)
    layout = _options.layout_from_args(args).validate(model)
    params_hand = _options.parse_count(args.params) if args.params is not None else None
    gpu_memory = _options.parse_memory(args.gpu_memory) if args.gpu_memory is not None else None
    bill = evaluate(derivation(model, layout, params_hand), model, layout, params_hand, gpu_memory)
    if args.json:
        print(render_json(bill))
    else:
        print_text(bill)
    return 0
