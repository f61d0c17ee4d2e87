"""``symbolic plan MODEL --gpus N --gpu-memory 80GB``: every valid layout, the fitting ones ranked."""
from __future__ import annotations

import argparse

from . import _gpu, _options
from ..render.plan import MAX_LISTED, render_json, render_text  # (render/plan.py: the API renders with them too)

HELP = "sweep every valid layout (t, p, d, c, b, v, ZeRO, SP, recompute) on N GPUs; rank those that fit"


def add_hardware_options(parser) -> None:
    group = parser.add_argument_group("memory and time model")
    group.add_argument("--gpu-memory", metavar="SIZE", help="memory per GPU (80GB, 80GiB, or a GPU's name: its "
                       "memory and its hardware, as --gpu); this or --gpu is required")
    _gpu.add_gpu_option(group)
    add_margin_option(group)


def add_margin_option(group) -> None:
    """``--margin``: default the bill's own not-counted estimate (``bill.evaluate.default_margin``)."""
    _options.add(group, "margin")


def parse_margin(text: str | None, gpu_memory: int) -> int:
    """'0', '4GB', '10%' (of the GPU memory) -> bytes; None: the default margin
    (:func:`symbolic.bill.evaluate.margin_bytes`, which the API reads a margin with too)."""
    from ..bill.evaluate import margin_bytes

    return margin_bytes(text, gpu_memory)


def add_arguments(parser) -> None:
    _options.add_model_argument(parser, optional=True)
    _options.add_from_option(parser)
    T = _options.INT_TYPES
    parser.add_argument("--gpus", type=T["gpus"], required=True, help="number of GPUs N = t·p·d·c (at most 10^7)")
    parser.add_argument("--seq", type=T["seq"], default=0, help="sequence length s (default: the model's training "
                        "length, else 4096 capped by max_position_embeddings)")
    parser.add_argument("--global-batch", type=T["global_batch"], default=0,
                        help="sequences per iteration (default: one micro-batch per data-parallel rank)")
    parser.add_argument("--params", metavar="N", help="hand-filled parameter count for the model states (7B)")
    _options.add_optimizer_option(parser)
    parser.add_argument("--optimizer-impl", choices=("foreach", "fused"), default="foreach",
                        help="foreach: PyTorch's default step (fp32 temporaries of the shard); fused: FusedAdam (none)")
    _options.add_dtype_option(parser)
    _options.add_stage_layer_options(parser, " — uneven stages for every layout (default: where p does not divide "
                                     "the layers, Megatron's first/last splits whose fullest stage holds ⌈L/p⌉)")
    _options.add_schedule_option(parser)
    _options.add_fp8_activations_option(parser, " — every layout")
    parser.add_argument("--flash-attention", action="store_true",
                        help="every layout runs the fused attention kernel on a GPT layer: no s×s tensor saved, "
                             "Q·Kᵀ recomputed in its backward (LLaMA/MoE layers have it)")
    _options.add_loss_option(parser)
    _options.add_sweep_lever_options(parser)
    parser.add_argument("--top", type=_options.bounded_int(0, 10**9), default=10,
                        help=f"layouts to show (0: all that fit, at most {MAX_LISTED:,}; default 10)")
    parser.add_argument("--json", action="store_true", help="the layouts as JSON, exact integers in bytes and FLOPs")
    parser.add_argument("--brief", action="store_true", help="the answer alone: how many fit, the best layout")
    add_hardware_options(parser)
    _options.add_time_options(parser, gpus_per_node=False)
    _options.add_framework_option(parser)
    sweep = parser.add_argument_group("sweep limits and fixed choices (default: swept)")
    sweep.add_argument("--max-micro-batch", type=T["micro_batch"], default=16,
                       help="largest micro-batch tried without --global-batch (powers of two; default 16)")
    sweep.add_argument("--gpus-per-node", type=T["tp"], default=None,
                       help="GPUs per NVLink domain: t stays within it, and the time model places each group's "
                            "collectives on NVLink or the network by it (default: the hardware's, 8)")
    sweep.add_argument("--tp", type=T["tp"], help="fix the tensor-parallel size")
    sweep.add_argument("--pp", type=T["pp"], help="fix the pipeline-parallel size")
    sweep.add_argument("--dp", type=T["dp"], help="fix the data-parallel size")
    sweep.add_argument("--cp", type=T["cp"], help="fix the context-parallel size c (1: no context parallelism)")
    sweep.add_argument("--ep", type=T["ep"],
                       help="fix the expert-parallel size e (mixture of experts; default: swept over divisors of E)")
    sweep.add_argument("--etp", type=T["etp"],
                       help="fix the expert tensor-parallel size e_t (default: swept; e_t = t is Megatron's default)")
    sweep.add_argument("--moe-capacity-factor", metavar="F", default="1",
                       help="busiest expert's tokens over the balanced share, for every layout (default 1)")
    sweep.add_argument("--micro-batch", type=T["micro_batch"], help="fix the micro-batch size")
    sweep.add_argument("--interleave", type=T["interleave"], help="fix the model chunks per stage (v)")
    _options.add_zero_option(sweep, default=None, help="fix the ZeRO stage")
    _options.add_recompute_option(sweep, default=None, help="fix the recompute policy")
    sweep.add_argument("--sp", action=argparse.BooleanOptionalAction, default=None,
                       help="fix sequence parallelism on (--sp) or off (--no-sp)")


def run(args) -> int:
    import time

    from ..search.plan import FIXABLE, plan

    model = _options.load_model(args)
    gpu = required_gpu(args)
    gpu_memory, hardware = gpu.memory, gpu.hardware
    margin = parse_margin(args.margin, gpu_memory)
    params_hand = _options.parse_count(args.params) if args.params is not None else None
    _, overlap, _ = _options.time_options(args)
    from ..layout.precision import plan_dtype
    args.dtype, args.fp8_activations, note = plan_dtype(args.dtype, args.fp8_activations)  # --dtype fp8: the recipe
    if note:
        _options.PENDING_NOTES.append(note)
    # the preset fills the swept layouts' shared fields the user did not type (the ZeRO stage is swept)
    shared = _options.apply_framework(_options.Layout(
        optimizer=args.optimizer, dtype=args.dtype, loss=_options.loss_from_args(args, model),
        flash_attention=args.flash_attention), args)
    from ..render.progress import progress

    start = time.perf_counter()
    # plan() is one vectorised sweep with no steps to count: on a terminal, a spinner with the clock
    with progress(None, f"evaluating the layouts of {model.name} on {args.gpus} GPUs"):
        result = plan(model, args.gpus, gpu_memory, seq=args.seq, global_batch=args.global_batch, margin=margin,
                      params_hand=params_hand, optimizer=shared.optimizer, dtype=args.dtype, hardware=hardware,
                      optimizer_impl=args.optimizer_impl,
                      max_micro_batch=args.max_micro_batch, gpus_per_node=args.gpus_per_node,
                      fixed={name: getattr(args, name) for name in FIXABLE}, overlap=overlap,
                      moe_capacity=_options.parse_ratio(args.moe_capacity_factor, "--moe-capacity-factor"),
                      fp8_activations=args.fp8_activations, first_stage_layers=args.first_stage_layers,
                      last_stage_layers=args.last_stage_layers,
                      flash_attention=shared.flash_attention, loss=shared.loss,
                      loss_under_tp=_options.loss_under_tp(args, model, shared.loss),
                      levers=_options.levers_from_args(args), schedule=args.schedule or "")
    elapsed = time.perf_counter() - start
    if getattr(args, "framework", None) is None and getattr(args, "launch", None) is None and args.gpus > 1:
        from ..layout.frameworks import ASSUMED, papers_model

        if not papers_model(model):  # bill assumes a framework per layout; a sweep prices every layout alike
            result.notes.append(f"no --framework: every layout priced with the bill's own defaults, alike; a bill "
                                f"of one with t, p, c or e > 1 assumes {ASSUMED}'s (give --framework NAME to plan "
                                "as one framework runs)")
    shown = result.ranked(min(args.top or MAX_LISTED, MAX_LISTED))  # each listed layout is evaluated exactly
    closest = None if shown else result.closest()
    if args.json:
        print(render_json(result, shown, closest, gpu))
    else:
        from ..render.terminal import output_width

        print(render_text(result, shown, closest, elapsed, output_width(), args.brief, gpu))
    return 0 if shown else 1


def required_gpu(args) -> _gpu.GpuChoice:
    """``--gpu`` or ``--gpu-memory`` (one is required), with ``--hardware`` overriding the time's figures."""
    from ..models.config import ConfigError

    gpu = _gpu.from_args(args)
    if gpu.memory is None:
        raise ConfigError("give the GPU: --gpu NAME (e.g. --gpu h100: its memory and its hardware) or "
                          "--gpu-memory SIZE (e.g. --gpu-memory 80GB)")
    return gpu


