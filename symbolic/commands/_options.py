"""Options shared by the commands, and the parsers of user-typed quantities.

No user text reaches ``eval`` or ``sympify``: counts and memory sizes are read
with ``decimal.Decimal`` and a fixed table of units.
"""
from __future__ import annotations

import argparse
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path

from ..layout.choices import FLOAT_ACTIVATION_DTYPES, RECOMPUTE
from ..layout.layout import Layout
from ..layout.recipes import RECIPES
from ..models.builtin import preset
from ..models.config import ConfigError, ModelConfig

MEMORY_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
                "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
COUNT_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


#: GPU memory by name (seed 004 §09: H100 → H200 → B200), the usable bytes per GPU.
#: H100 SXM 80 GB and H200 141 GB HBM3/HBM3e (NVIDIA datasheets); B200: 192 GB physical
#: HBM3e of which 180 GB usable (seed 004 §09; NVIDIA DGX B200 lists 1,440 GB for 8 GPUs).
GPU_MEMORY = {"h100": 80 * 10**9, "h200": 141 * 10**9, "b200": 180 * 10**9}


def parse_memory(text: str, field: str = "--gpu-memory") -> int:
    """'80GB', '80 GiB', '1.5TB' -> bytes; a GPU's name (h100, h200, b200) -> its
    usable memory (:data:`GPU_MEMORY`). A bare number is refused: GB or GiB?"""
    if field == "--gpu-memory" and str(text or "").strip().lower() in GPU_MEMORY:
        return GPU_MEMORY[text.strip().lower()]
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)\s*", text or "")
    if not match or match.group(2) not in MEMORY_UNITS:
        raise ConfigError(f"{field} {text!r}: give a number with a unit, e.g. 80GB (10^9 B) or 80GiB (2^30 B); "
                          f"units: {', '.join(MEMORY_UNITS)}"
                          + (f"; or a GPU: {', '.join(GPU_MEMORY)}" if field == "--gpu-memory" else ""))
    value = Decimal(match.group(1)) * MEMORY_UNITS[match.group(2)]
    if value != value.to_integral_value() or value <= 0:
        raise ConfigError(f"{field} {text!r} is not a positive whole number of bytes")
    return int(value)


def parse_count(text: str, field: str = "--params") -> int:
    """'7B', '1.5B', '175e9', '7000000000' -> an exact positive integer."""
    match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([KMBT]?)\s*", text or "")
    try:
        if not match:
            raise InvalidOperation
        value = Decimal(match.group(1)) * COUNT_SUFFIXES[match.group(2)]
    except InvalidOperation:
        raise ConfigError(f"{field} {text!r}: give a count such as 7B, 1.5B, 175e9 or 7000000000") from None
    if value != value.to_integral_value() or value <= 0:
        raise ConfigError(f"{field} {text!r} is not a positive whole number")
    return int(value)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a built-in model (gpt-22b, gpt-175b, gpt-530b, gpt-1t, gpt-7b, "
                        "llama-2-7b, mixtral-8x7b) or a path to a HuggingFace config.json (or its folder)")


def load_model(args) -> ModelConfig:
    """The model named by ``args.model``: a built-in name, or a path to an HF
    ``config.json`` file or to the folder holding one."""
    return model_from_text(args.model)


def model_from_text(text: str) -> ModelConfig:
    from ..models.builtin import presets

    if text in presets():
        return preset(text)
    path = Path(text)
    if path.is_dir():
        path = path / "config.json"
    if path.suffix == ".json" or path.is_file():
        from ..models.hf import load_hf_config
        return load_hf_config(path)
    return preset(text)  # the error naming the built-in models


def add_layout_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("layout")
    group.add_argument("--seq", type=_positive, default=0, help="sequence length s (default: the model's)")
    group.add_argument("--micro-batch", type=_positive, default=1, help="micro-batch size b (default 1)")
    group.add_argument("--tp", type=_positive, default=1, help="tensor-parallel size t")
    group.add_argument("--pp", type=_positive, default=1, help="pipeline-parallel size p")
    group.add_argument("--dp", type=_positive, default=1, help="data-parallel size d")
    group.add_argument("--cp", type=_positive, default=1,
                       help="context-parallel size c: each sequence split over c ranks (GPUs = t·p·d·c)")
    group.add_argument("--ep", type=_positive, default=1,
                       help="expert-parallel size e: routed experts split over e ranks folded into t·d·c "
                            "(Megatron-Core's expert_model_parallel_size; GPUs stay t·p·d·c)")
    group.add_argument("--etp", type=_positive, default=0,
                       help="expert tensor-parallel size e_t: each expert's FFN width split e_t ways "
                            "(Megatron-Core's expert_tensor_parallel_size; default: tp)")
    group.add_argument("--moe-capacity-factor", metavar="F", default="1",
                       help="tokens of the busiest expert over the balanced share s·b·k/E (1.25, 5/4; default 1)")
    group.add_argument("--recompute-modules", metavar="LIST", default="",
                       help="with --recompute selective: Megatron-Core's modules recomputed, comma-separated "
                            "(core_attn, moe_act; default core_attn)")
    group.add_argument("--fused-swiglu", action="store_true",
                       help="the experts' SwiGLU as one fused kernel (keeps only its input)")
    group.add_argument("--first-stage-layers", type=_positive, default=0, metavar="N",
                       help="layers on the first pipeline stage (Megatron-Core's --decoder-first-pipeline-num-layers; "
                            "the others split the rest evenly)")
    group.add_argument("--last-stage-layers", type=_positive, default=0, metavar="N",
                       help="layers on the last pipeline stage (Megatron-Core's --decoder-last-pipeline-num-layers)")
    group.add_argument("--fp8-activations", action="store_true",
                       help="the linear layers' saved inputs kept in FP8 for backward (Transformer Engine; "
                            "DeepSeek-V3 §3.3.3)")
    group.add_argument("--sp", action="store_true", help="sequence parallelism over the TP group")
    group.add_argument("--recompute", choices=RECOMPUTE, default="none", help="activation recompute")
    group.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage over d")
    group.add_argument("--optimizer", choices=sorted(RECIPES), default="bf16-adam",
                       help="model-state recipe (bytes per parameter)")
    group.add_argument("--interleave", type=_positive, default=1,
                       help="model chunks per stage, interleaved schedule (v; 1 = plain 1F1B)")
    group.add_argument("--dtype", choices=FLOAT_ACTIVATION_DTYPES, default="bf16", help="activation dtype")
    group.add_argument("--global-batch", type=_positive, default=0,
                       help="sequences per iteration (default micro-batch × dp)")


def layout_from_args(args) -> Layout:
    return Layout(micro_batch=args.micro_batch, seq=args.seq, tp=args.tp, pp=args.pp, dp=args.dp,
                  sp=args.sp, recompute=args.recompute, zero=args.zero, optimizer=args.optimizer,
                  interleave=args.interleave, dtype=args.dtype, global_batch=args.global_batch,
                  cp=getattr(args, "cp", 1), ep=getattr(args, "ep", 1), etp=getattr(args, "etp", 0),
                  moe_capacity=parse_ratio(getattr(args, "moe_capacity_factor", "1"), "--moe-capacity-factor"),
                  recompute_modules=tuple(name.strip() for name in getattr(args, "recompute_modules", "").split(",")
                                          if name.strip()),
                  fused_swiglu=getattr(args, "fused_swiglu", False),
                  fp8_activations=getattr(args, "fp8_activations", False),
                  first_stage_layers=getattr(args, "first_stage_layers", 0),
                  last_stage_layers=getattr(args, "last_stage_layers", 0))


def parse_ratio(text: str, field: str) -> Fraction:
    """'1.25', '5/4', '1' -> an exact positive Fraction (never eval)."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(?:/\s*([0-9]+)\s*)?", str(text or ""))
    if not match or (match.group(2) is not None and int(match.group(2)) == 0):
        raise ConfigError(f"{field} {text!r}: give a positive number such as 1, 1.25 or 5/4")
    value = Fraction(Decimal(match.group(1))) / (int(match.group(2)) if match.group(2) else 1)
    if value <= 0:
        raise ConfigError(f"{field} {text!r} must be positive")
    return value
