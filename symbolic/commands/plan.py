"""``symbolic plan MODEL --gpus N --gpu-memory 80GB``: every valid layout, the fitting ones ranked."""
from __future__ import annotations

import argparse

from . import _options

HELP = "sweep every valid layout (t, p, d, c, b, v, ZeRO, SP, recompute) on N GPUs; rank those that fit"


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in (0, 1]")
    return value


def _tflops(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number of TFLOP/s")
    return value


def _zero(text: str) -> int:
    if text not in ("0", "1", "2", "3"):
        raise argparse.ArgumentTypeError(f"{text!r}: ZeRO stage is 0, 1, 2 or 3")
    return int(text)


def add_hardware_options(parser) -> None:
    group = parser.add_argument_group("memory and time model")
    group.add_argument("--gpu-memory", metavar="SIZE", required=True, help="memory per GPU (80GB, 80GiB)")
    group.add_argument("--margin", metavar="SIZE", default="0",
                       help="memory reserved for what the ledgers leave out (workspaces, communication buffers, "
                            "fragmentation): a size (4GB) or a share of --gpu-memory (10%%); default 0")
    group.add_argument("--peak-tflops", type=_tflops, default=312.0,
                       help="dense peak TFLOP/s per GPU (default 312: A100 bf16)")
    group.add_argument("--mfu", type=_fraction, default=0.5,
                       help="fraction of peak the hardware FLOPs achieve (default 0.5)")


def parse_margin(text: str, gpu_memory: int) -> int:
    """'0', '4GB', '10%' (of the GPU memory) -> bytes."""
    from decimal import Decimal, InvalidOperation

    from ..models.config import ConfigError

    text = (text or "").strip()
    if text.endswith("%"):
        try:
            share = Decimal(text[:-1])
        except InvalidOperation:
            share = Decimal(-1)
        if not 0 <= share < 100:
            raise ConfigError(f"--margin {text!r}: a share must be between 0% and 100%")
        return int(share * gpu_memory / 100)
    if text in ("0", "0B"):
        return 0
    margin = _options.parse_memory(text, "--margin")
    if margin >= gpu_memory:
        raise ConfigError(f"--margin {text!r} must be below --gpu-memory")
    return margin


def add_arguments(parser) -> None:
    _options.add_model_argument(parser)
    parser.add_argument("--gpus", type=_options._positive, required=True, help="number of GPUs N = t·p·d·c")
    parser.add_argument("--seq", type=_options._positive, default=0, help="sequence length s (default: the model's)")
    parser.add_argument("--global-batch", type=_options._positive, default=0,
                        help="sequences per iteration (default: one micro-batch per data-parallel rank)")
    parser.add_argument("--params", metavar="N", help="hand-filled parameter count for the model states (7B)")
    parser.add_argument("--optimizer", default="bf16-adam", help="model-state recipe (bf16-adam, fp32-adam, ...)")
    parser.add_argument("--dtype", default="bf16", help="activation dtype (bf16, fp16, fp32, fp8)")
    parser.add_argument("--first-stage-layers", type=_options._positive, default=0, metavar="N",
                        help="uneven pipeline stages for every layout: layers on the first stage "
                             "(Megatron-Core's --decoder-first-pipeline-num-layers)")
    parser.add_argument("--last-stage-layers", type=_options._positive, default=0, metavar="N",
                        help="layers on the last stage (Megatron-Core's --decoder-last-pipeline-num-layers)")
    parser.add_argument("--fp8-activations", action="store_true",
                        help="every layout keeps its linear layers' saved inputs in FP8 (Transformer Engine; "
                             "DeepSeek-V3 §3.3.3)")
    parser.add_argument("--top", type=int, default=10, help="layouts to show (0: all that fit; default 10)")
    parser.add_argument("--json", action="store_true", help="the layouts as JSON, exact integers in bytes and FLOPs")
    add_hardware_options(parser)
    sweep = parser.add_argument_group("sweep limits and fixed choices (default: swept)")
    sweep.add_argument("--max-micro-batch", type=_options._positive, default=16,
                       help="largest micro-batch tried without --global-batch (powers of two; default 16)")
    sweep.add_argument("--gpus-per-node", type=_options._positive, default=8,
                       help="tensor parallelism stays within a node: t ≤ this (default 8)")
    sweep.add_argument("--tp", type=_options._positive, help="fix the tensor-parallel size")
    sweep.add_argument("--pp", type=_options._positive, help="fix the pipeline-parallel size")
    sweep.add_argument("--dp", type=_options._positive, help="fix the data-parallel size")
    sweep.add_argument("--cp", type=_options._positive,
                       help="fix the context-parallel size c (1: no context parallelism)")
    sweep.add_argument("--ep", type=_options._positive,
                       help="fix the expert-parallel size e (mixture of experts; default: swept over divisors of E)")
    sweep.add_argument("--etp", type=_options._positive,
                       help="fix the expert tensor-parallel size e_t (default: swept; e_t = t is Megatron's default)")
    sweep.add_argument("--moe-capacity-factor", metavar="F", default="1",
                       help="busiest expert's tokens over the balanced share, for every layout (default 1)")
    sweep.add_argument("--micro-batch", type=_options._positive, help="fix the micro-batch size")
    sweep.add_argument("--interleave", type=_options._positive, help="fix the model chunks per stage (v)")
    sweep.add_argument("--zero", type=_zero, help="fix the ZeRO stage")
    sweep.add_argument("--recompute", choices=("none", "selective", "full"), help="fix the recompute policy")
    sweep.add_argument("--sp", action=argparse.BooleanOptionalAction, default=None,
                       help="fix sequence parallelism on (--sp) or off (--no-sp)")


def run(args) -> int:
    import time

    from ..models.config import ConfigError
    from ..search.plan import FIXABLE, Hardware, plan

    model = _options.load_model(args)
    gpu_memory = _options.parse_memory(args.gpu_memory)
    margin = parse_margin(args.margin, gpu_memory)
    params_hand = _options.parse_count(args.params) if args.params else None
    if args.top < 0:
        raise ConfigError(f"--top {args.top}: give 0 (all) or a positive count")
    hardware = Hardware("A100 bf16 dense" if args.peak_tflops == 312 else "--peak-tflops",
                        args.peak_tflops * 1e12, args.mfu)
    start = time.perf_counter()
    result = plan(model, args.gpus, gpu_memory, seq=args.seq, global_batch=args.global_batch, margin=margin,
                  params_hand=params_hand, optimizer=args.optimizer, dtype=args.dtype, hardware=hardware,
                  max_micro_batch=args.max_micro_batch, gpus_per_node=args.gpus_per_node,
                  fixed={name: getattr(args, name) for name in FIXABLE},
                  moe_capacity=_options.parse_ratio(args.moe_capacity_factor, "--moe-capacity-factor"),
                  fp8_activations=args.fp8_activations, first_stage_layers=args.first_stage_layers,
                  last_stage_layers=args.last_stage_layers)
    elapsed = time.perf_counter() - start
    shown = result.ranked(args.top)
    closest = None if shown else result.closest()
    if args.json:
        print(render_json(result, shown, closest))
    else:
        print(render_text(result, shown, closest, elapsed))
    return 0 if shown else 1


def _assumptions(result) -> dict[str, str]:
    from ..core.numeric import fmt

    return {
        "memory": (f"fits when model states + activations (the stage the bill accounts) ≤ "
                   f"{fmt(result.gpu_memory, 'GB')} − margin {fmt(result.margin, 'GB')} = {fmt(result.usable, 'GB')}; "
                   "a lower bound: embedding/logits activations, workspaces, communication buffers and "
                   "fragmentation are not counted"),
        "time": (f"step = hardware FLOPs per GPU (recompute included) / ({result.hardware.describe()}) "
                 "× (1 + pipeline bubble (p−1)/(v·m)), m = micro-batches per pipeline per iteration "
                 "(Narayanan et al. 2021 §2.2); communication not modelled"),
        "rank": ("time per sequence (= step time at a fixed global batch), then fewest context-parallel ranks "
                 "(their ring communication is not modelled), then fewest expert-grid ranks e·e_t (their "
                 "all-to-all is not modelled), then headroom, then fewest t·p"),
    }


def render_text(result, shown, closest, elapsed: float) -> str:
    from ..core.numeric import fmt

    model = result.model
    s = result.seq or model.seq
    out = [f"{model.name} on {result.gpus} GPUs × {fmt(result.gpu_memory, 'GB')} "
           f"({fmt(result.gpu_memory, 'GiB')}), s = {s}, "
           + (f"global batch {result.global_batch}" if result.global_batch else "one micro-batch per DP rank")
           + (f", Psi = {result.params_hand:,} (hand-filled)" if result.params_hand else "")
           + f", {result.optimizer}, {result.dtype} activations"
           + (" (linear inputs in FP8)" if result.fp8_activations else ""),
           f"{result.evaluated:,} valid layouts evaluated in {elapsed * 1e3:.0f} ms; {len(result.order):,} fit"]
    for name, text in _assumptions(result).items():
        out.append(f"  {name}: {text}")
    out.append("  layouts: " + "; ".join(result.rules))
    out.append("")
    if not shown:
        out.append(f"NO LAYOUT FITS in {fmt(result.usable, 'GB')} per GPU.")
        if closest is not None:
            miss = -closest.headroom_bytes
            out.append(f"closest: {_describe(closest.layout)} needs {fmt(closest.totals['total_bytes'], 'GB')} "
                       f"(states {fmt(closest.totals['model_states_bytes'], 'GB')} + activations "
                       f"{fmt(closest.totals['activation_bytes'], 'GB')}): misses by {fmt(miss, 'GB')}")
        return "\n".join(out)
    moe = bool(model.experts)  # the expert grid's columns, e and e_t, for a mixture of experts only
    header = (f"{'#':>3} {'t':>2} {'p':>3} {'d':>4} {'c':>3} " + (f"{'e':>3} {'e_t':>3} " if moe else "") + f"{'v':>2} {'b':>3} {'m':>4} {'ZeRO':>4} {'SP':>3} "
              f"{'recompute':<9} {'states':>9} {'activ.':>9} {'total':>9} {'headroom':>9} "
              f"{'TFLOPs/GPU':>10} {'step':>8} {'bubble':>6}  binding")
    out.append(header)
    out.append(f"{'':>{57 if moe else 49}}{'GB':>9} {'GB':>9} {'GB':>9} {'GB':>9} {'per step':>10} {'s':>8}")
    for rank, item in enumerate(shown, 1):
        lay, tot = item.layout, item.totals
        out.append(f"{rank:>3} {lay.tp:>2} {lay.pp:>3} {lay.dp:>4} {lay.cp:>3} "
                   + (f"{lay.ep:>3} {lay.etp or lay.tp:>3} " if moe else "") + f"{lay.interleave:>2} {lay.micro_batch:>3} "
                   f"{item.micro_batches_per_pipeline:>4} {lay.zero:>4} {'yes' if lay.sp else 'no':>3} "
                   f"{lay.recompute:<9} {_gb(tot['model_states_bytes']):>9} {_gb(tot['activation_bytes']):>9} "
                   f"{_gb(tot['total_bytes']):>9} {_gb(item.headroom_bytes):>9} "
                   f"{_num(tot['flops_per_gpu_per_iteration'], 10**12):>10} {item.step_seconds:>8.3f} "
                   f"{item.bubble:>6.1%}  {item.binding}")
    if len(result.order) > len(shown):
        out.append(f"... {len(result.order) - len(shown):,} more fit (--top 0 shows all)")
    out.append("m: micro-batches per pipeline per iteration; exact values: `symbolic bill MODEL` with the same "
               "options, or --json")
    return "\n".join(out)


def _gb(value) -> str:
    return _num(value, 10**9)


def _num(value, unit: int) -> str:
    from sympy import Rational

    from ..core.numeric import round_half_up

    return f"{round_half_up(Rational(value) / unit, 2):,.2f}"


def _describe(layout) -> str:
    experts = f"e={layout.ep} e_t={layout.etp or layout.tp} " if layout.ep > 1 or layout.etp else ""
    return (f"t={layout.tp} p={layout.pp} d={layout.dp} c={layout.cp} {experts}v={layout.interleave} b={layout.micro_batch} "
            f"ZeRO-{layout.zero}{' SP' if layout.sp else ''} {layout.recompute} recompute")


def render_json(result, shown, closest) -> str:
    import json

    data = {
        "model": result.model.name, "gpus": result.gpus, "gpu_memory_bytes": result.gpu_memory,
        "margin_bytes": result.margin, "usable_bytes": result.usable, "seq": result.seq or result.model.seq,
        "global_batch": result.global_batch, "params_hand": result.params_hand, "optimizer": result.optimizer,
        "dtype": result.dtype, "fp8_activations": result.fp8_activations,
        "hardware": {"peak_flops": result.hardware.peak_flops, "utilisation": result.hardware.utilisation},
        "assumptions": _assumptions(result), "rules": result.rules,
        "evaluated": result.evaluated, "fitting": len(result.order),
        "layouts": [item.as_dict() for item in shown],
        "closest": closest.as_dict() if closest is not None else None,
    }
    return json.dumps(data, indent=2)
