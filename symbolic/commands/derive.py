"""``symbolic derive QUANTITY [options]``: the simplified expression, in the papers' letters."""
from __future__ import annotations

from . import _options
from ..claims.derivation import ALIASES, DeriveRequest, derivation as derive_request
from ..render.derive import json_data, render_text  # (render/derive.py: the API renders with them too)

HELP = "print the derived expression of a quantity (activations, params, states, flops, ...)"


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
    from ..layout.choices import BASE_DTYPES, LORA_TARGETS, OFFLOAD_MODES
    levers = parser.add_argument_group("levers (state-terms)")
    # --lora as the other commands type it (a rank); alone, r stays a letter
    levers.add_argument("--lora", type=_options._positive, nargs="?", const=True, default=False, metavar="R",
                        help="LoRA adapters of rank r; the base frozen (a value is the rank, else r stays a letter)")
    levers.add_argument("--lora-targets", choices=LORA_TARGETS, default="all-linear",
                        help="the weights LoRA adapts (default all-linear, as QLoRA)")
    levers.add_argument("--base-dtype", choices=BASE_DTYPES, default="bf16", help="frozen base storage (nf4: QLoRA)")
    _options.add(levers, "double_quant", help="NF4 constants in fp32")  # --no-double-quant
    levers.add_argument("--offload", choices=OFFLOAD_MODES, default="none",
                        help="optimizer: ZeRO-Offload (gradients and optimizer states in CPU memory); "
                             "optimizer-states: the optimizer states alone, gradients on the GPU (Megatron's "
                             "--optimizer-cpu-offload); params: FSDP CPU offload (parameters too)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--latex", action="store_true", help="print LaTeX")
    out.add_argument("--json", action="store_true", help="print JSON; `expr` parses back with sympy")


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
    """What ``derive`` prints for the parsed flags (:func:`symbolic.claims.derivation.derivation`)."""
    return derive_request(DeriveRequest.of(args))


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
