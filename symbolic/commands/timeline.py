"""``symbolic timeline MODEL [layout options]``: memory over one training step.

The four lifetime classes instant by instant, the peak expression, the peak
value and its phase t*, the reserved memory of the caching-allocator model;
``--png`` draws it (seed 004 §04.2), ``--json`` prints exact integers.
"""
from __future__ import annotations

from . import _gpu, _options
from ..render.timeline import render_text, report  # (render/timeline.py: the API uses them too)

HELP = "memory over one training step: the four lifetime classes per instant, the peak and its phase t*"


def add_arguments(parser) -> None:
    _options.add_model_argument(parser, optional=True)
    _options.add_from_option(parser)
    _options.add_layout_options(parser)
    _options.add_pipeline_layout_option(parser)
    _options.add_schedule_option(parser)
    # LoRA, QLoRA's base, offload, activation offload, the optimizer step's implementation and the fused attention
    # kernel: the bill's memory levers (a launch config's reading sets them too)
    _options.add_lever_options(parser, _options.MEMORY_LEVERS + ("optimizer_impl", "flash_attention"))
    parser.add_argument("--optimize", action="append", default=[], metavar="NAME",
                        help="apply an optimisation (repeatable): zero, fp8-weights, fp8-optimizer, optimizer-offload, "
                             "activation-offload, fp8-activations, flash-attention, fused-cross-entropy")
    parser.add_argument("--gpu-memory", metavar="SIZE", help="memory per GPU to compare against (80GB, 80GiB, or "
                        "a GPU's name)")
    _gpu.add_gpu_option(parser)
    parser.add_argument("--stage", default="first", metavar="STAGE",
                        help="pipeline stage: first (most micro-batches in flight), last (the output side and loss), "
                             "middle (uneven first/last counts: rank 1, the busiest middle stage) or a pipeline rank "
                             "0 … p−1 (a per-chunk layout or placed dense layers: any stage)")
    parser.add_argument("--nccl-buffsize", metavar="SIZE", default="4MiB", help="NCCL_BUFFSIZE per channel (4MiB)")
    parser.add_argument("--nccl-channels", type=_options.bounded_int(1, 1024), default=16, metavar="N", help="NCCL channels per communicator (16)")
    parser.add_argument("--bucket", metavar="SIZE", default="25MiB", help="gradient bucket, data parallel (25MiB)")
    parser.add_argument("--png", metavar="FILE", help="draw the timeline and the peak breakdown (needs matplotlib)")
    parser.add_argument("--json", action="store_true", help="exact integers under stable keys")
    parser.add_argument("--brief", action="store_true", help="the answer alone: the peak against the GPU")
    _options.add_framework_option(parser)  # the preset's memory fields (attention, ZeRO, loss, main grads)


def run(args) -> int:
    import json

    from ..step.optimizations import apply
    from ..step.timeline import CommSettings, MemoryOptions

    if args.png is not None:
        _options.check_output(args.png, "--png")
    model = _options.load_model(args)
    layout = _options.apply_framework(_options.layout_from_args(args, model), args, overlap=False, model=model)
    comm = CommSettings(_options.parse_memory(args.nccl_buffsize, "--nccl-buffsize"), args.nccl_channels,
                        _options.parse_memory(args.bucket, "--bucket"))
    layout, options = apply(args.optimize, layout, MemoryOptions(comm=comm))
    gpu = _gpu.from_args(args)
    gpu_memory = gpu.memory
    if layout.precision != "bf16" and getattr(args, "gpu", None):   # the recipe on the GPU named (its copies)
        from ..layout.precision import on_hardware
        layout = on_hardware(layout, gpu.hardware)
    data, tl, result, reserved = report(model, layout, options, gpu_memory, getattr(args, "stage", "first"))
    data["gpu"] = gpu.as_dict()
    if getattr(args, "_preset", None) is not None and args._preset.fields:  # what --framework filled
        data["framework_preset"] = args._preset.as_dict()
    if args.png is not None:
        from ..render.memory_plot import timeline_figure, use_file_backend
        use_file_backend()
        fig = timeline_figure(result, reserved, f"{model.name}: {tl.strategy.describe()}", gpu_memory)
        _options.write_figure(fig, args.png, "--png")
    if args.json:
        print(json.dumps(data, indent=1))
        return 0

    from ..render.terminal import output_width

    print(render_text(data, tl.strategy.describe(), output_width(), args.brief, args.png))
    return 0


