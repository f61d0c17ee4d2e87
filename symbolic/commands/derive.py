"""``symbolic derive QUANTITY [options]``: the simplified expression, in the papers' letters."""
from __future__ import annotations

from . import _options

HELP = "print the derived expression of a quantity (activations, params, states, flops, ...)"

#: Short names a user types, and the registry entries they stand for.
ALIASES = {
    "activations": "activations.per_layer",
    "activations-total": "activations.stage",
    "interleave-factor": "activations.interleave_factor",
    "params": "params",
    "states": "states.per_gpu",
    "bytes-per-param": "states.bytes_per_param",
    "flops-forward": "flops.forward",
    "flops": "flops.model_training",
    "flops-hardware": "flops.hardware_training",
    "flops-per-token": "flops.kaplan_training_per_token",
}


def add_arguments(parser) -> None:
    from ..models.architectures import ARCHITECTURES

    parser.add_argument("quantity", help=f"one of {', '.join(ALIASES)} (or a registry name, e.g. activations.stage)")
    parser.add_argument("--arch", choices=sorted(ARCHITECTURES),
                        help="the layer inventory (default: the --model's, else gpt)")
    parser.add_argument("--model", metavar="MODEL",
                        help="a built-in model or an HF config.json (or its folder): picks the inventory and "
                             "also prints the expression at the model's dimensions (L, h, a, V, s, ...)")
    # The layout sizes are the other commands' flags, with the same types: given alone (--tp) the
    # letter stays a symbol; given a value (--tp 8) it is also substituted.
    T = _options.INT_TYPES
    parser.add_argument("--tp", type=T["tp"], nargs="?", const=True, default=False, metavar="T",
                        help="tensor parallelism (divides by t); with a value, t is also substituted")
    parser.add_argument("--sp", action="store_true", help="sequence parallelism (needs --tp)")
    parser.add_argument("--cp", type=T["cp"], nargs="?", const=True, default=False, metavar="C",
                        help="context parallelism: each of c ranks holds s/c of the sequence; a value substitutes c")
    _options.add_recompute_option(parser)
    _options.add_dtype_option(parser)
    parser.add_argument("--pipeline", action="store_true", help="first pipeline stage (1F1B: p in flight)")
    parser.add_argument("--pp", type=T["pp"], nargs="?", const=True, default=False, metavar="P",
                        help="the same as --pipeline; a value substitutes p")
    parser.add_argument("--interleave", type=T["interleave"], nargs="?", const=True, default=False, metavar="V",
                        help="interleaved schedule with v chunks (needs --pipeline); a value substitutes v")
    parser.add_argument("--dp", type=T["dp"], metavar="D", help="substitute the data-parallel size d")
    parser.add_argument("--seq", type=T["seq"], metavar="S", help="substitute the sequence length s")
    parser.add_argument("--micro-batch", type=T["micro_batch"], metavar="B", help="substitute the micro-batch size b")
    _options.add_optimizer_option(parser)
    _options.add_zero_option(parser)
    # Tying and positions are passed only when given, so each arch keeps its defaults
    # (GPT: tied, learned positions; LLaMA/MoE: untied, RoPE).
    tying = parser.add_mutually_exclusive_group()
    tying.add_argument("--untied", dest="tied", action="store_false", default=None, help="untied output layer")
    tying.add_argument("--tied", dest="tied", action="store_true", default=None,
                       help="output layer tied to the word embedding")
    positions = parser.add_mutually_exclusive_group()
    positions.add_argument("--rope", dest="positions", action="store_const", const="rope", default=None,
                           help="rotary positions: no position table")
    positions.add_argument("--learned", dest="positions", action="store_const", const="learned", default=None,
                           help="a learned position table of s·h")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--latex", action="store_true", help="print LaTeX")
    out.add_argument("--json", action="store_true", help="print JSON; `expr` parses back with sympy")


def _substitutions(args) -> dict[str, int]:
    """The letters given a value (``--tp 8``: t = 8), and the switches they imply."""
    out = {}
    for flag, letter in (("tp", "t"), ("cp", "c"), ("pp", "p"), ("interleave", "v"), ("dp", "d"),
                         ("seq", "s"), ("micro_batch", "b")):
        value = getattr(args, flag)
        if value is not None and value is not True and value is not False:
            out[letter] = value
    args.pipeline = bool(args.pipeline or args.pp)
    args.tp, args.cp, args.interleave = bool(args.tp), bool(args.cp), bool(args.interleave)
    return out


def _quantity_options(name: str, args) -> dict:
    family = name.split(".")[0]
    if family == "activations":
        options = dict(tensor_parallel=args.tp, sequence_parallel=args.sp, recompute=args.recompute, dtype=args.dtype,
                       pipeline=args.pipeline, interleaved=args.interleave)
        if args.cp:  # only when asked: the options printed for the other layouts stay as they were
            options["context_parallel"] = True
        if name == "activations.interleave_factor":
            options.pop("pipeline")
            options.pop("interleaved")
        return dict(options, arch=args.arch)
    if family == "params":
        given = {} if name == "params.kaplan" else {
            key: value for key, value in (("tied", args.tied), ("positions", args.positions)) if value is not None}
        return dict(arch=args.arch, **given)
    if family == "states":
        return dict(recipe=args.optimizer, **({"zero": args.zero} if name == "states.per_gpu" else {}))
    if name in ("flops.hardware_training", "flops.recompute_ratio", "flops.recompute_ratio_leading"):
        return dict(arch=args.arch, recompute=args.recompute)
    if family == "flops":
        return dict(arch=args.arch)
    return {}


def run(args) -> int:
    import json

    from sympy import sstr

    from ..claims.quantities import REGISTRY, evaluate
    from ..core.forms import paper_form, to_latex
    from ..core.numeric import substitute

    name = ALIASES.get(args.quantity, args.quantity)
    if name not in REGISTRY:
        raise ValueError(f"unknown quantity {args.quantity!r}; use one of {', '.join(ALIASES)} "
                         f"or a registry name ({', '.join(sorted(REGISTRY))})")
    model = _options.model_from_text(args.model) if args.model else None
    if model is not None and args.arch is not None and args.arch != model.arch:
        raise ValueError(f"--arch {args.arch} contradicts --model {model.name}, whose inventory is "
                         f"{model.arch}: drop --arch")
    args.arch = args.arch or (model.arch if model is not None else "gpt")
    substitutions = _substitutions(args)
    options = _quantity_options(name, args)
    expr = evaluate(name, **options)
    shown = paper_form(expr)
    entry = REGISTRY[name]
    # At the model's dimensions, the layout's letters (b, t, p, d, ...) stay symbols.
    at_model = paper_form(substitute(expr, {**model.values(), **substitutions})) if model is not None else None
    at_values = paper_form(substitute(expr, substitutions)) if substitutions and model is None else None
    if args.json:
        data = {"quantity": name, "options": options, "unit": entry.unit, "expr": sstr(expr),
                "paper_form": sstr(shown), "latex": to_latex(shown), "doc": entry.doc}
        if substitutions:
            data["substituted"] = substitutions
        if at_values is not None:
            data["at_values"] = sstr(at_values)
        if model is not None:
            data.update(model=model.name, model_values=model.values(), at_model=sstr(at_model),
                        approximations=list(model.approximations))
        print(json.dumps(data, ensure_ascii=False, indent=2))
    elif args.latex:
        print(to_latex(at_model if model is not None else at_values if at_values is not None else shown))
    else:
        print(f"{name} [{entry.unit}] = {sstr(shown)}")
        if at_values is not None:
            print(f"  at {', '.join(f'{k}={v}' for k, v in substitutions.items())}: {sstr(at_values)}")
        if model is not None:
            values = ", ".join(f"{k}={v}" for k, v in {**model.values(), **substitutions}.items())
            print(f"  at {model.name} ({values}): {sstr(at_model)}")
            for note in model.approximations:
                print(f"  approximation: {note}")
    return 0
