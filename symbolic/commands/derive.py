"""``symbolic derive QUANTITY [options]``: the simplified expression, in the papers' letters."""
from __future__ import annotations

from ..layout.choices import FLOAT_ACTIVATION_DTYPES, RECOMPUTE
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
    from ..ledgers.states import RECIPES
    from ..models.architectures import ARCHITECTURES

    parser.add_argument("quantity", help=f"one of {', '.join(ALIASES)} (or a registry name, e.g. activations.stage)")
    parser.add_argument("--arch", choices=sorted(ARCHITECTURES),
                        help="the layer inventory (default: the --model's, else gpt)")
    parser.add_argument("--model", metavar="MODEL",
                        help="a built-in model or an HF config.json (or its folder): picks the inventory and "
                             "also prints the expression at the model's dimensions (L, h, a, V, s, ...)")
    parser.add_argument("--tp", action="store_true", help="tensor parallelism (divides by t)")
    parser.add_argument("--sp", action="store_true", help="sequence parallelism (needs --tp)")
    parser.add_argument("--cp", action="store_true",
                        help="context parallelism: each of c ranks holds s/c of the sequence")
    parser.add_argument("--ep", action="store_true",
                        help="expert parallelism (MoE): routed experts split over e ranks")
    parser.add_argument("--etp", action="store_true",
                        help="expert tensor parallelism (MoE): each expert's width split over e_t ranks (off: e_t = t)")
    parser.add_argument("--recompute", choices=RECOMPUTE, default="none")
    parser.add_argument("--fp8-activations", action="store_true",
                        help="the linear layers' saved inputs in FP8 (Transformer Engine; DeepSeek-V3 §3.3.3)")
    parser.add_argument("--dtype", choices=FLOAT_ACTIVATION_DTYPES, default="bf16", help="activation dtype")
    parser.add_argument("--pipeline", action="store_true", help="first pipeline stage (1F1B: p in flight)")
    parser.add_argument("--interleave", action="store_true", help="interleaved schedule with v chunks (needs --pipeline)")
    parser.add_argument("--uneven", action="store_true",
                        help="uneven pipeline stages: the first holds L_1 layers (needs --pipeline; Megatron-Core's "
                             "first/last-stage layer counts)")
    parser.add_argument("--optimizer", default="bf16-adam", choices=sorted(RECIPES), help="model-state recipe")
    parser.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0)
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


def _quantity_options(name: str, args) -> dict:
    family = name.split(".")[0]
    if family == "activations":
        options = dict(tensor_parallel=args.tp, sequence_parallel=args.sp, recompute=args.recompute, dtype=args.dtype,
                       pipeline=args.pipeline, interleaved=args.interleave)
        if args.cp:  # only when asked: the options printed for the other layouts stay as they were
            options["context_parallel"] = True
        if args.ep:
            options["expert_parallel"] = True
        if args.etp:
            options["expert_tensor_parallel"] = True
        if args.fp8_activations:
            options["fp8_gemm_inputs"] = True
        if args.uneven:
            options["uneven_stages"] = True
        if name == "activations.interleave_factor":
            options.pop("pipeline")
            options.pop("interleaved")
            options.pop("uneven_stages", None)
        return dict(options, arch=args.arch)
    if family == "params":
        given = {} if name == "params.kaplan" else {
            key: value for key, value in (("tied", args.tied), ("positions", args.positions)) if value is not None}
        return dict(arch=args.arch, **given)
    if name == "states.experts_per_gpu":
        return dict(arch=args.arch, recipe=args.optimizer, zero=args.zero, expert_parallel=args.ep,
                    expert_tensor_parallel=args.etp)
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
    if name == "states.per_gpu" and args.arch == "moe":  # the routed experts on their own grid
        name = "states.experts_per_gpu"
    if (args.ep or args.etp) and args.arch != "moe" and name.split(".")[0] in ("activations", "states"):
        raise ValueError("--ep/--etp split the routed experts: use them with --arch moe (or an MoE --model)")
    options = _quantity_options(name, args)
    expr = evaluate(name, **options)
    shown = paper_form(expr)
    entry = REGISTRY[name]
    # At the model's dimensions, the layout's letters (b, t, p, d, ...) stay symbols.
    at_model = paper_form(substitute(expr, model.values())) if model is not None else None
    if args.json:
        data = {"quantity": name, "options": options, "unit": entry.unit, "expr": sstr(expr),
                "paper_form": sstr(shown), "latex": to_latex(shown), "doc": entry.doc}
        if model is not None:
            data.update(model=model.name, model_values=model.values(), at_model=sstr(at_model),
                        approximations=list(model.approximations))
        print(json.dumps(data, ensure_ascii=False, indent=2))
    elif args.latex:
        print(to_latex(shown) if model is None else to_latex(at_model))
    else:
        print(f"{name} [{entry.unit}] = {sstr(shown)}")
        if model is not None:
            values = ", ".join(f"{k}={v}" for k, v in model.values().items())
            print(f"  at {model.name} ({values}): {sstr(at_model)}")
            for note in model.approximations:
                print(f"  approximation: {note}")
    return 0
