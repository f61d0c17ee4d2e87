"""``symbolic calculator -o calculator.html``: the HTML calculator page.

One self-contained file (no network at run time) whose formulas are generated
from the engine's expressions. Without options its defaults are seed 001 §5's
Figure 5-1: the 7B example, b = 4, t = 8, sequence parallelism, N = 7B, 80 GB.
The hand-filled N defaults to the model's size label (7B, 175B), as the seed
fills it in. Every built-in model is on the page, each with the formulas of its
own inventory; a mixture of experts takes ``--ep`` (its experts' width split
over e_t = t, Megatron-Core's default: ``--etp`` otherwise is refused).
Without ``--global-batch`` the page's G is empty: the bill's steady state (m = p with a pipeline).
``--lora``, ``--base-dtype``, ``--no-double-quant``, ``--offload`` (LLaMA inventory) and
``--activation-offload``, ``--loss`` open the page with those levers, priced from the bill's terms.
"""
from __future__ import annotations

from . import _gpu, _options

HELP = "write the HTML calculator (seed 001 §5), its formulas generated from the engine"


def add_arguments(parser) -> None:
    parser.add_argument("-o", "--output", default="calculator.html", help="the page to write (default calculator.html)")
    parser.add_argument("--model", default="gpt-7b", help="the model the page opens with (default gpt-7b)")
    _options.add_layout_options(parser)
    _options.add_lever_options(parser)
    parser.add_argument("--no-sp", dest="sp", action="store_false", help="open without sequence parallelism")
    parser.add_argument("--params", metavar="N",
                        help="hand-filled parameter count the page opens with (default: the model's size label, "
                             "e.g. 7B; 'config' for none)")
    parser.add_argument("--gpu-memory", metavar="SIZE", default=None,
                        help="GPU memory the page opens with (default 80GB, or the --gpu's)")
    _gpu.add_gpu_option(parser)
    parser.set_defaults(micro_batch=4, tp=8, sp=True)
    parser.epilog = ("Defaults are seed 001's Figure 5-1: --model gpt-7b --micro-batch 4 --tp 8 --sp "
                     "--params 7B --gpu-memory 80GB.")


def run(args) -> int:
    from ..core.inputs import clean
    from ..models.config import ConfigError
    from ..render.html import render

    _options.check_output(args.output, "--output")
    model = _options.load_model(args)
    layout = _options.layout_from_args(args, model)
    if layout.cp > 1:
        raise ConfigError(f"--cp {layout.cp}: the calculator page has no context-parallel input; "
                          "use `symbolic bill` or `symbolic plan` with --cp")
    # --ep is a page input (the routed experts over e ranks, each expert's width over e_t = t);
    # the page has no e_t of its own nor a capacity factor
    if layout.etp not in (0, layout.tp):
        raise ConfigError(f"--etp {layout.etp}: the calculator page splits each expert's width over the "
                          f"tensor-parallel ranks (e_t = t = {layout.tp}, Megatron-Core's default); use "
                          "`symbolic bill` or `symbolic plan` with --etp")
    if layout.moe_capacity != 1:
        raise ConfigError(f"--moe-capacity-factor {layout.moe_capacity}: the calculator page routes tokens "
                          "balanced (C_f = 1); use `symbolic bill` or `symbolic plan` with it")
    if layout.offload == "optimizer-states":
        raise ConfigError("--offload optimizer-states: the calculator page offers none, optimizer and params; "
                          "use `symbolic bill` or `symbolic timeline`")
    if layout.recompute == "op-sac":
        raise ConfigError("--recompute op-sac: the calculator page offers Korthikanti's none, selective and full; "
                          "use `symbolic bill` or `symbolic timeline` for torchtitan's per-op policy")
    if layout.recompute_modules or layout.fused_swiglu:
        raise ConfigError("--recompute-modules / --fused-swiglu: the calculator page has no input for them; "
                          "use `symbolic bill`")
    if layout.moe_dispatcher != "hf" or layout.moe_pad_to_capacity:
        raise ConfigError("--moe-dispatcher / --moe-pad-to-capacity: the calculator page has no input for them; "
                          "use `symbolic bill`")
    # LoRA, QLoRA and offload: page inputs for the LLaMA inventory, every linear layer adapted
    from ..render.html import LEVER_ARCH, LORA_TARGETS_PAGE, page_arch
    if (layout.lora or layout.offload != "none") and page_arch(model) != LEVER_ARCH:
        raise ConfigError(f"--lora/--offload with {model.name}: the calculator page prices them for the LLaMA "
                          "inventory only; use `symbolic bill` with them")
    if layout.lora_targets != LORA_TARGETS_PAGE or layout.optimizer_impl != "foreach" or layout.flash_attention:
        raise ConfigError("--lora-targets / --optimizer-impl / --flash-attention: the calculator page adapts every "
                          "linear layer, steps PyTorch's foreach optimizer and prices each inventory's own attention "
                          "kernel; use `symbolic bill` with them")
    if args.params is None:  # the model's size label, where it reads as a count
        try:
            params_hand = _options.parse_count(model.params_label) if model.params_label else None
        except ConfigError:
            params_hand = None
    else:
        params_hand = None if args.params in ("", "config") else _options.parse_count(args.params)
    # --gpu sets the memory the page opens with and the GPU its step time opens on (one of the page's
    # GPUs, render.page_time.PAGE_GPUS: every hardware file; without --gpu the bill's default hardware, the A100-80GB)
    from ..ledgers.hardware import builtin
    from ..render.page_time import PAGE_GPUS
    choice = _gpu.resolve(args.gpu, args.gpu_memory if args.gpu or args.gpu_memory else "80GB")
    on_page = {builtin()[key].name: key for key in PAGE_GPUS}
    if args.gpu and choice.hardware.name not in on_page:
        raise ConfigError(f"--gpu {clean(args.gpu)}: the calculator page prices the step time on "
                          f"{', '.join(PAGE_GPUS)}; choose one of them, or use `symbolic bill --gpu {clean(args.gpu)}`")
    page = render(model, layout, params_hand=params_hand, gpu_memory=choice.memory,
                  hardware=on_page.get(choice.hardware.name, "a100-80gb"))
    size = _options.write_output(args.output, page, "--output")
    print(f"wrote {clean(args.output)} ({size:,} bytes)")
    return 0
