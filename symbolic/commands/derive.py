"""``symbolic derive QUANTITY [options]``: the simplified expression, in the papers' letters."""
from __future__ import annotations

from . import _options
from ..render.derive import json_data, render_text  # (render/derive.py: the API renders with them too)

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
    "comm-volume": "communication.traffic",
}


def add_arguments(parser) -> None:
    from ..models.architectures import ARCHITECTURES

    parser.add_argument("quantity", help=f"one of {', '.join(ALIASES)}, state-terms (each model-state term of a "
                        "recipe and its levers), or a registry name, e.g. activations.stage")
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
    parser.add_argument("--ep", type=T["ep"], nargs="?", const=True, default=False, metavar="E",
                        help="expert parallelism (MoE): routed experts split over e ranks; a value substitutes e")
    parser.add_argument("--etp", type=T["etp"], nargs="?", const=True, default=False, metavar="ET",
                        help="expert tensor parallelism (MoE): each expert's width split over e_t ranks "
                             "(off: e_t = t); a value substitutes e_t")
    parser.add_argument("--pipeline", action="store_true",
                        help="first pipeline stage, m ≥ p micro-batches per iteration (1F1B: p in flight; a bill "
                             "with fewer holds min(m, p))")
    parser.add_argument("--pp", type=T["pp"], nargs="?", const=True, default=False, metavar="P",
                        help="the same as --pipeline; a value substitutes p")
    parser.add_argument("--interleave", type=T["interleave"], nargs="?", const=True, default=False, metavar="V",
                        help="interleaved schedule with v chunks (needs --pipeline); a value substitutes v")
    parser.add_argument("--dp", type=T["dp"], metavar="D", help="substitute the data-parallel size d")
    parser.add_argument("--seq", type=T["seq"], metavar="S", help="substitute the sequence length s")
    parser.add_argument("--micro-batch", type=T["micro_batch"], metavar="B", help="substitute the micro-batch size b")
    parser.add_argument("--uneven", action="store_true",
                        help="uneven pipeline stages: the first holds L_1 layers (needs --pipeline; Megatron-Core's "
                             "first/last-stage layer counts)")
    _options.add_fp8_activations_option(parser)
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
    from ..layout.choices import BASE_DTYPES, LORA_TARGETS, OFFLOAD
    levers = parser.add_argument_group("levers (state-terms)")
    # --lora as the other commands type it (a rank); alone, r stays a letter
    levers.add_argument("--lora", type=_options._positive, nargs="?", const=True, default=False, metavar="R",
                        help="LoRA adapters of rank r; the base frozen (a value is the rank, else r stays a letter)")
    levers.add_argument("--lora-targets", choices=LORA_TARGETS, default="all-linear",
                        help="the weights LoRA adapts (default all-linear, as QLoRA)")
    levers.add_argument("--base-dtype", choices=BASE_DTYPES, default="bf16", help="frozen base storage (nf4: QLoRA)")
    _options.add(levers, "double_quant", help="NF4 constants in fp32")  # --no-double-quant
    levers.add_argument("--offload", choices=OFFLOAD, default="none",
                        help="optimizer: ZeRO-Offload (gradients and optimizer states in CPU memory); "
                             "params: FSDP CPU offload (parameters too)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--latex", action="store_true", help="print LaTeX")
    out.add_argument("--json", action="store_true", help="print JSON; `expr` parses back with sympy")


def _substitutions(args) -> dict[str, int]:
    """The letters given a value (``--tp 8``: t = 8), and the switches they imply."""
    out = {}
    for flag, letter in (("tp", "t"), ("cp", "c"), ("pp", "p"), ("interleave", "v"), ("dp", "d"),
                         ("seq", "s"), ("micro_batch", "b"), ("ep", "e"), ("etp", "e_t")):
        value = getattr(args, flag)
        if value is not None and value is not True and value is not False:
            out[letter] = value
    args.pipeline = bool(args.pipeline or args.pp)
    args.tp, args.cp, args.interleave = bool(args.tp), bool(args.cp), bool(args.interleave)
    args.ep, args.etp = bool(args.ep), bool(args.etp)
    return out


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
    if family == "communication":
        options = dict(arch=args.arch, sequence_parallel=args.sp, recompute=args.recompute, zero=args.zero,
                       pipeline=args.pipeline, interleaved=args.interleave, context_parallel=args.cp,
                       dtype=args.dtype, recipe=args.optimizer)
        if args.tied is not None:
            options["tied"] = args.tied
        return options
    return {}


def _collective_lines(options: dict) -> list[str]:
    """The communication ledger's terms behind ``communication.*``: one line each."""
    from sympy import sstr

    from ..ledgers.quantities import _collectives

    lines = []
    for x in _collectives(**options):
        lines.append(f"  {x.name:<44} over {x.group:<2} {x.collective:<14} bytes/call {sstr(x.bytes):<22} "
                     f"calls/iteration {sstr(x.calls):<22} [{x.phase}] {x.source}")
    lines.append("  traffic per rank = Σ calls × ring factor (all-reduce 2(n−1)/n, gather/scatter/all-to-all (n−1)/n, "
                 "send 1) × bytes/call; B/(b·d) micro-batches per pipeline, L/p layers per GPU")
    return lines


def derivation(args) -> dict:
    """What ``derive`` prints, as plain data (the ``--json`` object): the
    quantity, its options, the expression, its paper form and LaTeX; with a
    model, the expression at the model's dimensions."""
    from sympy import sstr

    from ..claims.quantities import REGISTRY, evaluate
    from ..core.forms import paper_form, to_latex
    from ..core.numeric import substitute

    if args.quantity == "state-terms":
        raise ValueError("state-terms prints each term (derive state-terms), not one expression")
    name = ALIASES.get(args.quantity, args.quantity)
    if name not in REGISTRY:
        raise ValueError(f"unknown quantity {args.quantity!r}; use one of {', '.join(ALIASES)} "
                         f"or a registry name ({', '.join(sorted(REGISTRY))})")
    model = _options.model_from_text(args.model) if args.model else None
    if model is not None and args.arch is not None and args.arch != model.arch:
        raise ValueError(f"--arch {args.arch} contradicts --model {model.name}, whose inventory is "
                         f"{model.arch}: drop --arch")
    if model is not None and model.arch == "composed" and args.arch is None:
        from ..models.architectures import composed  # the model's own recipe, in its own letters
        args.arch = composed.register(model)
    args.arch = args.arch or (model.arch if model is not None else "gpt")
    # a composed family with a router (Qwen3-MoE, DeepSeek) is a mixture of experts as the moe inventory is
    experts = args.arch == "moe" or (args.arch.startswith("composed:") and model is not None and bool(model.experts))
    if name == "states.per_gpu" and experts:  # the routed experts on their own grid
        name = "states.experts_per_gpu"
    if (args.ep or args.etp) and not experts and name.split(".")[0] in ("activations", "states"):
        raise ValueError("--ep/--etp split the routed experts: use them with --arch moe (or an MoE --model)")
    substitutions = _substitutions(args)
    options = _quantity_options(name, args)
    expr = evaluate(name, **options)
    shown = paper_form(expr)
    entry = REGISTRY[name]
    data = {"quantity": name, "options": options, "unit": entry.unit, "expr": sstr(expr),
            "paper_form": sstr(shown), "latex": to_latex(shown), "doc": entry.doc}
    if substitutions:
        data["substituted"] = substitutions
    if substitutions and model is None:
        at_values = paper_form(substitute(expr, substitutions))
        data.update(at_values=sstr(at_values), at_values_latex=to_latex(at_values))
    if model is not None:
        # At the model's dimensions, the layout's letters (b, t, p, d, ...) stay symbols unless given.
        values = {**model.values(), **substitutions}
        at_model = paper_form(substitute(expr, values))
        data.update(model=model.name, model_values=values, at_model=sstr(at_model),
                    approximations=list(model.approximations), at_model_latex=to_latex(at_model))
    return data


def run(args) -> int:
    import json

    if args.quantity == "state-terms":  # each model-state term of the levers, one line each
        return _state_terms(args)
    data = derivation(args)
    if args.json:
        print(json.dumps(json_data(data), ensure_ascii=False, indent=2))
    elif args.latex:
        print(data.get("at_model_latex") or data.get("at_values_latex") or data["latex"])
    else:
        from ..render.terminal import output_width

        print(render_text(data, output_width()))
        if data["quantity"].startswith("communication."):
            print("\n".join(_collective_lines(data["options"])))
    return 0


def _state_terms(args) -> int:
    """Each model-state term of the recipe under the levers (``ledgers.states.state_terms``), in the
    papers' letters, with where it lives and its source."""
    import json

    from sympy import sstr

    from ..bill.derive import architecture_inventories
    from ..ledgers import states
    from ..models.structure import Structure
    from ..models.config import ConfigError

    model = _options.model_from_text(args.model) if args.model else None
    arch = args.arch or (model.arch if model is not None else "gpt")
    if args.base_dtype != "bf16" and not args.lora:
        raise ConfigError(f"base-dtype {args.base_dtype}: a quantised base is frozen — add --lora (QLoRA)")
    param_inv = architecture_inventories(Structure(arch, True, True, "learned" if arch == "gpt" else "rope"))[0]
    terms, trainable = states.state_terms(states.RECIPES[args.optimizer], args.zero, param_inv, lora=bool(args.lora),
                                          lora_targets=args.lora_targets, base_dtype=args.base_dtype,
                                          double_quant=args.double_quant, offload=args.offload)
    if args.json:
        print(json.dumps({"arch": arch, "trainable": sstr(trainable), "terms": [
            {"name": x.name, "expr": sstr(x.bytes), "kind": x.kind, "device": x.device, "source": x.source}
            for x in terms]}, ensure_ascii=False, indent=2))
        return 0
    print(f"model states per GPU ({arch} inventory, {args.optimizer}, ZeRO-{args.zero}"
          + (f", LoRA on {args.lora_targets}" if args.lora else "") + (f", {args.base_dtype} base" if args.lora else "")
          + (f", offload {args.offload}" if args.offload != "none" else "") + "):")
    for x in terms:
        print(f"  [{x.device}] {x.name} [B] = {sstr(x.bytes)}    ({x.source})")
    print(f"  trainable parameters = {sstr(trainable)}")
    return 0
