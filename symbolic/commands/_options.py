"""Options shared by the commands, and the parsers of user-typed quantities: one
vocabulary for every command.

The same flag means the same thing, with the same type and choices, in every
command that has it (``tests/test_hostile.py`` walks every parser and checks it).
To add a flag to a command, reuse what is here:

- counts and sizes: :func:`bounded_int` (an argparse ``type`` with a stated
  range), :func:`parse_count` (``7B``, ``1.5e9``), :func:`parse_memory`
  (``80GB``, ``80 gb``, ``80GiB``; GB = 10^9 B, GiB = 2^30 B; a bare number is
  refused), :func:`parse_memory_or_share` (``4GB`` or ``10%``),
  :func:`bounded_float`;
- named choices: :func:`dtype` (``bf16``/``bfloat16``, ``fp16``/``float16``/``half``,
  ``fp32``/``float32``, ``fp8``: one canonical form, the short one), and the
  ``add_*_option`` helpers for ``--dtype``, ``--optimizer``, ``--zero``,
  ``--recompute``, which list their choices in ``--help``;
- the stated ranges, :data:`LIMITS`: what a value beyond them would mean is
  outside anything the engine is checked on, so it is refused with the range.

No user text reaches ``eval`` or ``sympify``: numbers are read with
``decimal.Decimal`` after a regular expression, with the exponent bounded
before any arithmetic (``1e99999999`` is refused, not computed).
"""
from __future__ import annotations

import argparse
import re
from dataclasses import replace
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path

from ..core.inputs import clean
from ..layout.choices import (BASE_DTYPES, FLOAT_ACTIVATION_DTYPES, LORA_TARGETS, MOE_DISPATCHERS, OFFLOAD,
                              OPTIMIZER_IMPLS, RECOMPUTE, ZERO_STAGES)
from ..layout.layout import Layout, default_loss
from ..models.losses import LOSS_KERNELS
from ..layout.recipes import RECIPES
from ..models.builtin import preset
from ..models.config import ConfigError, ModelConfig

#: Memory units, keyed in lower case (``80gb`` = ``80GB``); GB = 10^9 B, GiB = 2^30 B.
MEMORY_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15,
                "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}
_MEMORY_BY_LOWER = {unit.lower(): size for unit, size in MEMORY_UNITS.items()}
COUNT_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}

#: Stated ranges of what a user types (inclusive). Beyond them a value is refused with the range.
LIMITS = {
    "gpus": 10**7, "tp": 10**7, "pp": 10**7, "dp": 10**7, "cp": 10**7, "ep": 10**7, "etp": 10**7,
    "micro_batch": 10**6, "global_batch": 10**9, "seq": 10**8, "interleave": 10**5,
    "params": 10**16, "memory": 10**18, "count": 10**6, "stage_layers": 10**6,
}

#: GPU memory by name (seed 004 §09: H100 → H200 → B200), the usable bytes per GPU.
#: H100 SXM 80 GB and H200 141 GB HBM3/HBM3e (NVIDIA datasheets); B200: 192 GB physical
#: HBM3e of which 180 GB usable (seed 004 §09; NVIDIA DGX B200 lists 1,440 GB for 8 GPUs).
GPU_MEMORY = {"h100": 80 * 10**9, "h200": 141 * 10**9, "b200": 180 * 10**9}

#: Accepted spellings of each activation dtype, and the canonical (printed) form.
DTYPE_ALIASES = {
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "f16": "fp16",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "f32": "fp32",
    "fp8": "fp8", "float8": "fp8", "f8": "fp8",
}

_NUMBER = r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"


def _decimal(text: str) -> Decimal | None:
    """A finite decimal from ``[digits][.digits][e±digits]`` text, or None; the
    exponent is checked before the value is built (no ``1e99999999``)."""
    if not re.fullmatch(_NUMBER, text):
        return None
    exponent = re.search(r"[eE]([+-]?)([0-9]+)$", text)
    if exponent:
        digits = exponent.group(2).lstrip("0") or "0"
        if len(digits) > 3 or int(digits) > 60:  # beyond every stated range: the caller's range check decides
            return Decimal(0) if exponent.group(1) == "-" else Decimal(10) ** 61
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def parse_memory(text, field: str = "--gpu-memory") -> int:
    """'80GB', '80 gb', '80GiB', '1.5TB' -> bytes (an int is returned as it is,
    range-checked); for ``--gpu-memory`` a GPU's name (h100, h200, b200) -> its
    usable memory (:data:`GPU_MEMORY`). A bare number is refused: GB or GiB?"""
    if field == "--gpu-memory" and isinstance(text, str) and text.strip().lower() in GPU_MEMORY:
        return GPU_MEMORY[text.strip().lower()]
    if isinstance(text, int) and not isinstance(text, bool):
        value = Decimal(text)
    else:
        match = re.fullmatch(r"\s*([0-9.eE+-]+?)\s*([A-Za-z]+)\s*", str(text or ""))
        number = _decimal(match.group(1)) if match else None
        unit = _MEMORY_BY_LOWER.get(match.group(2).lower()) if match else None
        if number is None or unit is None:
            raise ConfigError(f"{field} {clean(text)!r}: give a number with a unit, e.g. 80GB (10^9 B) or 80GiB "
                              f"(2^30 B); units: {', '.join(MEMORY_UNITS)}"
                              + (f"; or a GPU: {', '.join(GPU_MEMORY)}" if field == "--gpu-memory" else ""))
        value = number * unit if number <= LIMITS["memory"] else number
    if value != value.to_integral_value() or value <= 0:
        raise ConfigError(f"{field} {clean(text)!r} is not a positive whole number of bytes")
    if value > LIMITS["memory"]:
        raise ConfigError(f"{field} {clean(text)!r}: more than {LIMITS['memory']:.0e} B (1 EB), the stated range")
    return int(value)


def parse_count(text, field: str = "--params", limit: int = LIMITS["params"]) -> int:
    """'7B', '1.5b', '175e9', '7000000000' -> an exact positive integer, at most ``limit``."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = Decimal(text)
    else:
        match = re.fullmatch(r"\s*([0-9.eE+-]+?)\s*([KMBTkmbt]?)\s*", str(text or ""))
        number = _decimal(match.group(1)) if match else None
        if number is None:
            raise ConfigError(f"{field} {clean(text)!r}: give a count such as 7B, 1.5B, 175e9 or 7000000000")
        value = number * COUNT_SUFFIXES[match.group(2).upper()] if number <= limit else number
    if value != value.to_integral_value() or value <= 0:
        raise ConfigError(f"{field} {clean(text)!r} is not a positive whole number")
    if value > limit:
        raise ConfigError(f"{field} {clean(text)!r}: more than {limit:,}, the stated range")
    return int(value)


def parse_memory_or_share(text, gpu_memory: int, field: str = "--margin") -> int:
    """'0', '4GB', '10%' (of ``gpu_memory``) -> bytes, below ``gpu_memory``."""
    text = str(text if text is not None else "").strip()
    if text.endswith("%"):
        share = _decimal(text[:-1].strip())
        if share is None or not 0 <= share < 100:
            raise ConfigError(f"{field} {clean(text)!r}: a share must be a number from 0% up to (not including) 100%")
        return int(share * gpu_memory / 100)
    if text in ("0", "0B", "0 B"):
        return 0
    margin = parse_memory(text, field)
    if margin >= gpu_memory:
        raise ConfigError(f"{field} {clean(text)!r} must be below the GPU memory ({gpu_memory:,} B)")
    return margin


def bounded_int(low: int, high: int, what: str = ""):
    """An argparse ``type``: an integer in [low, high] (``what`` names the range's reason)."""
    def parse(text: str) -> int:
        text = str(text).strip()
        if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
            raise argparse.ArgumentTypeError(f"{clean(text)!r} is not an integer")
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high:,}{what}")
        return value
    parse.__name__ = f"int[{low}..{high}]"
    parse.low, parse.high = low, high
    return parse


def bounded_float(low: float, high: float, low_open: bool = False):
    """An argparse ``type``: a finite decimal number in [low, high] ((low, high] if ``low_open``)."""
    def parse(text: str) -> float:
        number = _decimal(str(text).strip())
        if number is None:
            raise argparse.ArgumentTypeError(f"{clean(text)!r} is not a number")
        if number > Decimal(repr(high)) or number < Decimal(repr(low)) or (low_open and number == Decimal(repr(low))):
            raise argparse.ArgumentTypeError(f"{clean(text)!r} is outside {'(' if low_open else '['}{low:g}, {high:g}]")
        return float(number)
    parse.__name__ = f"float[{low:g}..{high:g}]"
    return parse


def dtype(text: str) -> str:
    """An argparse ``type``: any spelling of an activation dtype -> its canonical name."""
    return DTYPE_ALIASES.get(str(text).strip().lower(), str(text))


def _positive(text: str) -> int:  # kept for the commands that used it: a count of at least 1
    return _COUNT(text)


_COUNT = bounded_int(1, LIMITS["count"])
#: One ``type`` per layout letter, so every command types them alike.
INT_TYPES = {name: bounded_int(1, LIMITS[name]) for name in
             ("gpus", "tp", "pp", "dp", "cp", "ep", "etp", "micro_batch", "global_batch", "seq", "interleave")}
ZERO = bounded_int(0, 3)
#: Transformer layers of a pipeline stage (uneven stages): at least 1.
STAGE_LAYERS = bounded_int(1, LIMITS["stage_layers"])


def add_stage_layer_options(group, help_suffix: str = "") -> None:
    """Uneven pipeline stages (Megatron-Core's first/last-stage layer counts), the same in every command."""
    group.add_argument("--first-stage-layers", type=STAGE_LAYERS, default=0, metavar="N",
                       help="layers on the first pipeline stage (Megatron-Core's --decoder-first-pipeline-num-layers; "
                            "the others split the rest evenly)" + help_suffix)
    group.add_argument("--last-stage-layers", type=STAGE_LAYERS, default=0, metavar="N",
                       help="layers on the last pipeline stage (Megatron-Core's --decoder-last-pipeline-num-layers)"
                            + help_suffix)


def add_pipeline_layout_option(parser) -> None:
    """Megatron-Core's per-chunk pipeline layout (bill and timeline: the commands that account stages by their layers)."""
    parser.add_argument("--pipeline-layout", metavar="LAYOUT", default="",
                        help="Megatron-Core's --pipeline-model-parallel-layout: the p·v virtual stages' layers in "
                             "layer order, | between stages (E embedding, t layer, L loss; t*3, (tt|)*2 repeat), "
                             "e.g. 'Et*3|t*3|(t*4|)*13t*3L' for 61 layers on --pp 4 --interleave 4")


def add_fp8_activations_option(group, help_suffix: str = "") -> None:
    group.add_argument("--fp8-activations", action="store_true",
                       help="the linear layers' saved inputs kept in FP8 for backward (Transformer Engine; "
                            "DeepSeek-V3 §3.3.3)" + help_suffix)


def add_dtype_option(group, default="bf16", help="activation dtype") -> None:
    group.add_argument("--dtype", type=dtype, choices=FLOAT_ACTIVATION_DTYPES, default=default,
                       help=f"{help} (bfloat16, float16, float32 spellings accepted)")


def add_optimizer_option(group, default="bf16-adam") -> None:
    group.add_argument("--optimizer", choices=sorted(RECIPES), default=default,
                       help="model-state recipe (bytes per parameter)")


def add_zero_option(group, default=0, help="ZeRO stage over d") -> None:
    group.add_argument("--zero", type=int, choices=ZERO_STAGES, default=default, help=help)


def add_recompute_option(group, default="none", help="activation recompute") -> None:
    group.add_argument("--recompute", choices=RECOMPUTE, default=default, help=help)


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a built-in model (gpt-22b, gpt-175b, gpt-530b, gpt-1t, gpt-7b, "
                        "llama-2-7b, mixtral-8x7b, llama-3-8b, llama-3.1-70b, llama-3.1-405b, qwen3-8b, "
                        "qwen3-30b-a3b, mixtral-8x22b, gemma-2-9b, deepseek-v3) or a path to a HuggingFace "
                        "config.json (or its folder)")


def load_model(args) -> ModelConfig:
    """The model named by ``args.model``: a built-in name, or a path to an HF
    ``config.json`` file or to the folder holding one."""
    return model_from_text(args.model)


def model_from_text(text: str) -> ModelConfig:
    """A built-in name or a config path -> the model, with every string that came
    from the file made safe to print (:func:`symbolic.core.inputs.clean`)."""
    from ..models.builtin import presets

    if text in presets():
        return preset(text)
    path = Path(text)
    if path.is_dir():
        path = path / "config.json"
    if path.suffix == ".json" or path.exists():
        from ..models.hf import load_hf_config
        model = load_hf_config(path)
        return replace(model, name=clean(model.name), source=clean(model.source),
                       approximations=tuple(clean(note) for note in model.approximations))
    return preset(clean(text))  # the error naming the built-in models


def add_layout_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("layout")
    group.add_argument("--seq", type=INT_TYPES["seq"], default=0, help="sequence length s (default: the model's)")
    group.add_argument("--micro-batch", type=INT_TYPES["micro_batch"], default=1, help="micro-batch size b (default 1)")
    group.add_argument("--tp", type=INT_TYPES["tp"], default=1, help="tensor-parallel size t")
    group.add_argument("--pp", type=INT_TYPES["pp"], default=1, help="pipeline-parallel size p")
    group.add_argument("--dp", type=INT_TYPES["dp"], default=1, help="data-parallel size d")
    group.add_argument("--cp", type=INT_TYPES["cp"], default=1,
                       help="context-parallel size c: each sequence split over c ranks (GPUs = t·p·d·c)")
    group.add_argument("--ep", type=INT_TYPES["ep"], default=1,
                       help="expert-parallel size e: routed experts split over e ranks folded into t·d·c "
                            "(Megatron-Core's expert_model_parallel_size; GPUs stay t·p·d·c)")
    group.add_argument("--etp", type=INT_TYPES["etp"], default=0,
                       help="expert tensor-parallel size e_t: each expert's FFN width split e_t ways "
                            "(Megatron-Core's expert_tensor_parallel_size; default: tp)")
    group.add_argument("--moe-capacity-factor", metavar="F", default="1",
                       help="tokens of the busiest expert over the balanced share s·b·k/E (1.25, 5/4; default 1)")
    group.add_argument("--recompute-modules", metavar="LIST", default="",
                       help="with --recompute selective: Megatron-Core's modules recomputed, comma-separated "
                            "(core_attn, moe_act, layernorm, mla_up_proj; default core_attn)")
    group.add_argument("--fused-swiglu", action="store_true",
                       help="the experts' SwiGLU as one fused kernel (keeps only its input)")
    group.add_argument("--moe-dispatcher", choices=MOE_DISPATCHERS, default="hf",
                       help="hf: HF's eager experts loop (what the traces check); alltoall: Megatron-Core's "
                            "alltoall token dispatcher (permute/unpermute) and grouped experts")
    group.add_argument("--moe-pad-to-capacity", action="store_true",
                       help="Megatron-Core's moe_pad_expert_input_to_capacity: every expert computes on its "
                            "capacity C_f·s·b·k/E rows (with --moe-capacity-factor > 1, --moe-dispatcher alltoall)")
    add_stage_layer_options(group)
    add_fp8_activations_option(group)
    group.add_argument("--sp", action="store_true", help="sequence parallelism over the TP group")
    add_recompute_option(group)
    add_zero_option(group)
    add_optimizer_option(group)
    group.add_argument("--interleave", type=INT_TYPES["interleave"], default=1,
                       help="model chunks per stage, interleaved schedule (v; 1 = plain 1F1B)")
    add_dtype_option(group)
    group.add_argument("--global-batch", type=INT_TYPES["global_batch"], default=0,
                       help="sequences per iteration (default micro-batch × dp; with a pipeline its steady state, "
                            "pp × micro-batch × dp: m = p micro-batches)")
    add_loss_option(group)


def add_lever_options(parser: argparse.ArgumentParser) -> None:
    """Fine-tuning and memory levers (``Layout``'s lora, base_dtype, offload, optimizer_impl)."""
    group = parser.add_argument_group("memory levers")
    group.add_argument("--lora", type=_positive, default=0, metavar="R",
                       help="LoRA adapters of rank R; the base weights are frozen (no gradients, no optimizer states)")
    group.add_argument("--lora-targets", choices=LORA_TARGETS, default="all-linear",
                       help="the weights LoRA adapts (default all-linear, as QLoRA)")
    group.add_argument("--base-dtype", choices=BASE_DTYPES, default="bf16",
                       help="storage of the frozen base weights under --lora (nf4: QLoRA)")
    group.add_argument("--no-double-quant", action="store_true", help="NF4 constants in fp32 (QLoRA without DQ)")
    group.add_argument("--offload", choices=OFFLOAD, default="none",
                       help="optimizer: ZeRO-Offload (gradients and optimizer states in CPU memory); "
                            "params: FSDP CPU offload (parameters too)")
    group.add_argument("--optimizer-impl", choices=OPTIMIZER_IMPLS, default="foreach",
                       help="foreach: PyTorch's default step (fp32 temporaries); fused: FusedAdam (none)")
    group.add_argument("--activation-offload", action="store_true",
                       help="saved activations stream to CPU memory; a two-layer double buffer stays on the GPU")
    group.add_argument("--flash-attention", action="store_true",
                       help="the fused attention kernel on a GPT layer: no s×s tensor saved (LLaMA/MoE have it)")


def add_loss_option(group) -> None:
    """``--loss``: the loss kernel (``Layout.loss``); default the model's usual stack (``default_loss``)."""
    group.add_argument("--loss", choices=LOSS_KERNELS, default=None,
                       help="the loss kernel: eager (transformers, fp32 logits), vocab-parallel (Megatron), "
                            "fused (flash-attn / llm-foundry), chunked (torchtune), liger (fused linear CE); "
                            "default: an HF model's eager, the papers' GPT models' vocab-parallel")


def loss_from_args(args, model: ModelConfig | None) -> str:
    """The ``--loss`` given, else the model's usual stack's (``layout.default_loss``), else eager."""
    given = getattr(args, "loss", None)
    return given or (default_loss(model) if model is not None else "eager")


def steady_state_batch(global_batch: int, pp: int, micro_batch: int, dp: int) -> int:
    """``--global-batch`` as given; without it a pipeline (p > 1) in its steady state: m = p micro-batches
    per iteration, p in flight on the first stage (Korthikanti §4.2.3, Megatron's memory estimator),
    global batch p·b·d; without a pipeline 0 (one micro-batch per data-parallel rank)."""
    if global_batch or not isinstance(pp, int) or pp <= 1:
        return global_batch
    if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in (micro_batch, dp)):
        return global_batch  # the layout's validation names the bad size
    return pp * micro_batch * dp


def layout_from_args(args, model: ModelConfig | None = None) -> Layout:
    return Layout(micro_batch=args.micro_batch, seq=args.seq, tp=args.tp, pp=args.pp, dp=args.dp,
                  sp=args.sp, recompute=args.recompute, zero=args.zero, optimizer=args.optimizer,
                  interleave=args.interleave, dtype=args.dtype,
                  global_batch=steady_state_batch(args.global_batch, args.pp, args.micro_batch, args.dp),
                  cp=getattr(args, "cp", 1), ep=getattr(args, "ep", 1), etp=getattr(args, "etp", 0),
                  moe_capacity=parse_ratio(getattr(args, "moe_capacity_factor", "1"), "--moe-capacity-factor"),
                  recompute_modules=tuple(name.strip() for name in getattr(args, "recompute_modules", "").split(",")
                                          if name.strip()),
                  fused_swiglu=getattr(args, "fused_swiglu", False), lora=getattr(args, "lora", 0),
                  lora_targets=getattr(args, "lora_targets", "all-linear"),
                  base_dtype=getattr(args, "base_dtype", "bf16"),
                  double_quant=not getattr(args, "no_double_quant", False),
                  offload=getattr(args, "offload", "none"), optimizer_impl=getattr(args, "optimizer_impl", "foreach"),
                  flash_attention=getattr(args, "flash_attention", False),
                  activation_offload=getattr(args, "activation_offload", False),
                  fp8_activations=getattr(args, "fp8_activations", False),
                  first_stage_layers=getattr(args, "first_stage_layers", 0),
                  last_stage_layers=getattr(args, "last_stage_layers", 0),
                  moe_dispatcher=getattr(args, "moe_dispatcher", "hf"),
                  moe_pad_to_capacity=getattr(args, "moe_pad_to_capacity", False),
                  pipeline_layout=getattr(args, "pipeline_layout", ""),
                  loss=loss_from_args(args, model))


def parse_ratio(text: str, field: str, limit: int = 1000) -> Fraction:
    """'1.25', '5/4', '1' -> an exact positive Fraction at most ``limit`` (never eval)."""
    match = re.fullmatch(r"\s*([0-9]{1,30}(?:\.[0-9]{1,30})?)\s*(?:/\s*([0-9]{1,30})\s*)?", str(text or ""))
    if not match or (match.group(2) is not None and int(match.group(2)) == 0):
        raise ConfigError(f"{field} {clean(text)!r}: give a positive number such as 1, 1.25 or 5/4")
    value = Fraction(Decimal(match.group(1))) / (int(match.group(2)) if match.group(2) else 1)
    if not 0 < value <= limit:
        raise ConfigError(f"{field} {clean(text)!r} must be positive and at most {limit}")
    return value


def add_time_options(parser: argparse.ArgumentParser, gpus_per_node: bool = True) -> None:
    """--hardware, --overlap (and --gpus-per-node): the step-time model's inputs."""
    group = parser.add_argument_group("step-time model")
    group.add_argument("--hardware", metavar="NAME|FILE", default=None,
                       help="GPU kind (a100-80gb (default), a100-40gb, h100-sxm, h200, b200, gb200-nvl72) or a JSON "
                            "file shaped like symbolic/data/hardware/a100-80gb.json")
    group.add_argument("--overlap", choices=("default", "none", "all"), default="default",
                       help="communication hidden behind compute: default (DP grad reduce except its last bucket, "
                            "param all-gather / ZeRO-3 prefetch; TP exposed), none, all (also TP)")
    if gpus_per_node:
        group.add_argument("--gpus-per-node", type=INT_TYPES["tp"], default=None,
                           help="GPUs per NVLink domain (default: the hardware's, 8; GB200 NVL72: 72)")


def time_options(args):
    """(hardware, overlap, gpus_per_node) from :func:`add_time_options`'s arguments."""
    from ..ledgers.hardware import load
    from ..ledgers.time import OVERLAPS

    return load(args.hardware), OVERLAPS[args.overlap], getattr(args, "gpus_per_node", None)


def check_output(path: str, field: str = "--output") -> Path:
    """Before any expensive work: ``path`` names a file (not a folder) in an existing,
    writable folder; else one :class:`ConfigError` naming the field and the fix."""
    import os

    target = Path(path)
    if not str(path).strip():
        raise ConfigError(f"{field}: give a file name")
    if target.is_dir():
        raise ConfigError(f"{field} {clean(path)!r} is a folder; give a file name")
    parent = target.parent
    if not parent.is_dir():
        raise ConfigError(f"{field} {clean(path)!r}: folder {clean(parent)!r} does not exist; create it or write "
                          "elsewhere")
    if not os.access(parent, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ConfigError(f"{field} {clean(path)!r}: not writable (permissions); write elsewhere")
    return target


def write_output(path: str, data: str | bytes, field: str = "--output") -> int:
    """Write a command's output file; any failure (missing or read-only folder, a
    directory, a full disk, /dev/full) is one :class:`ConfigError` naming the
    field and the path. Returns the bytes written."""
    import errno

    payload = data.encode("utf-8") if isinstance(data, str) else data
    target = check_output(path, field)
    try:
        with open(target, "wb") as handle:
            handle.write(payload)
    except OSError as error:
        why = "no space left on the device" if error.errno == errno.ENOSPC else (error.strerror or str(error))
        raise ConfigError(f"{field} {clean(path)!r}: cannot write ({why})") from None
    return len(payload)


def write_figure(figure, path: str, field: str = "--png", dpi: int = 110) -> None:
    """Render a matplotlib figure in memory, then :func:`write_output` it (so a
    bad path fails as one line, and nothing half-written is left by the renderer)."""
    import io

    buffer = io.BytesIO()
    suffix = Path(path).suffix.lower().lstrip(".") or "png"
    try:
        figure.savefig(buffer, dpi=dpi, format=suffix)
    except ValueError as error:
        raise ConfigError(f"{field} {clean(path)!r}: {clean(error)}; give a .png (or .pdf, .svg) name") from None
    write_output(path, buffer.getvalue(), field)
