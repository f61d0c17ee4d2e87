"""Predicted against published throughput: the step-time model on runs nobody here made.

``derivations/throughput/public.json`` (a copy of ``shared/throughput/public.json``)
lists 28 published runs with their model, GPU, layout and measured TFLOP/s per
GPU. :func:`predict` prices each run with the plan's time model and reports the
throughput in the source's own FLOP convention:

* Narayanan et al. 2021 (Tables 1 and 2): their Eq 3, which counts the
  recompute forward — the engine's hardware FLOPs under full recompute (the
  inventory gives Eq 3 exactly);
* Megatron-LM's H100 table: Megatron-Core's logged model FLOPs — the engine's
  model FLOPs (no recompute, full s×s attention).

What a source does not print, the model chooses as a user of ``plan`` would —
the fastest layout that fits 80 GB with the printed sizes fixed: the
micro-batch, the interleaving, the recompute policy, SP, the ZeRO stage where
not printed. The overlap strategy is the source's framework's: Megatron-LM
2021 reduces gradients after the backward (``none``); DeepSpeed ZeRO-3
prefetches and overlaps its reduce (``default``); the Megatron-Core table
names ``--overlap-grad-reduce --overlap-param-gather --tp-comm-overlap``
(``all``). One hardware file per GPU kind; nothing is fitted to the rows.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..ledgers.hardware import load as load_hardware
from ..ledgers.time import OVERLAPS
from ..models.config import ConfigError, ModelConfig
from .plan import plan

DATA = Path(__file__).resolve().parents[2] / "derivations" / "throughput" / "public.json"
GPU_KINDS = {"A100-SXM4-80GB": "a100-80gb", "H100 80GB": "h100-sxm"}


@dataclass
class Prediction:
    row: dict
    model: str
    gpu: str
    layout: str
    measured: float          #: TFLOP/s per GPU, as the source prints it
    predicted: float         #: TFLOP/s per GPU in the source's convention; nan if nothing fits
    convention: str
    step_seconds: float
    binding: str
    chosen: str              #: what the model chose where the source is silent

    @property
    def error(self) -> float:
        return (self.predicted - self.measured) / self.measured


def rows(path: Path = DATA) -> list[dict]:
    return json.loads(Path(path).read_text())


def _model(row: dict) -> ModelConfig:
    dims = row["dims"]
    return ModelConfig(name=row["model"], layers=dims["L"], hidden=dims["h"], heads=dims["a"], vocab=dims["V"],
                       seq=dims["s"], ffn=dims.get("ffn") or 0, source=row["source"])


def _convention(row: dict) -> str:
    kind = row["measured"]["tflops_kind"]
    return "model" if kind.startswith("Megatron-Core") else "eq3"


def _overlap(row: dict) -> str:
    if row["layout"].get("overlaps"):
        return "all"
    return "default" if row["layout"].get("zero") == 3 else "none"


def predict(row: dict, gpu_memory: int = 80 * 10**9) -> Prediction:
    """Price one published run (module docstring)."""
    from ..bill.derive import make_bill

    model = _model(row)
    lay, hw_row = row["layout"], row["hardware"]
    hardware = load_hardware(GPU_KINDS[hw_row["gpu_type"]])
    fixed = {"tp": lay["tp"], "pp": lay["pp"], "dp": lay["dp"], "cp": lay.get("cp") or 1}
    if lay.get("mbs"):
        fixed["micro_batch"] = lay["mbs"]
    if lay.get("vp"):
        fixed["interleave"] = lay["vp"]
    zero = lay.get("zero")
    if zero in ("none", 0):
        fixed["zero"] = 0
    elif zero == 3:
        fixed["zero"] = 3
    recompute = lay.get("recompute")
    if isinstance(recompute, str) and recompute.startswith("full"):
        fixed["recompute"] = "full"
    if lay.get("sp") is False:
        fixed["sp"] = False
    if row["source"].startswith("arXiv 2104.04473"):
        # Narayanan et al. 2021 predate sequence parallelism and selective recompute (Korthikanti
        # 2022); their Eq 3 counts the full-recompute forward, which their runs used (§5.1).
        fixed.update(sp=False, recompute="full")
    # Megatron-LM reduces bf16 gradients in fp32 (arguments.py: bf16 forces
    # accumulate_allreduce_grads_in_fp32); Narayanan's fp16 runs reduce fp16 gradients.
    optimizer = "bf16-adam" if (lay.get("precision") or "").startswith("fp16") else "bf16-adam-fp32-grads"
    overlap = _overlap(row)
    convention = _convention(row)
    layout_text = f"t={lay['tp']} p={lay['pp']} d={lay['dp']} B={lay['gbs']}"
    # Megatron-LM (the Megatron-Core table) offers DDP or its distributed optimizer (ZeRO-1's
    # sharding), not ZeRO-2/3: where the stage is not printed, the faster of those two.
    stages = [fixed.get("zero")] if "zero" in fixed else [0, 1]
    best = []
    for stage in stages:
        try:
            result = plan(model, hw_row["gpus"], gpu_memory, global_batch=lay["gbs"], optimizer=optimizer,
                          hardware=hardware, gpus_per_node=hw_row.get("gpus_per_node") or 8,
                          fixed=dict(fixed, zero=stage), overlap=OVERLAPS[overlap], max_micro_batch=16)
        except ConfigError as error:
            return Prediction(row, row["model"], hardware.name, layout_text, row["measured"]["tflops_per_gpu"],
                              float("nan"), convention, float("nan"), f"no valid layout: {error}", "")
        best += result.ranked(1)
    best = sorted(best, key=lambda item: item.step_seconds)
    if not best:
        return Prediction(row, row["model"], hardware.name, layout_text, row["measured"]["tflops_per_gpu"],
                          float("nan"), convention, float("nan"), "nothing fits 80 GB", "")
    item = best[0]
    chosen_layout = item.layout
    if convention == "eq3":
        from dataclasses import replace
        flops_layout = replace(chosen_layout, recompute="full")
        counted = make_bill(model, flops_layout).totals["flops_per_gpu_per_iteration"]
    else:
        counted = item.totals["model_flops_per_iteration"] / chosen_layout.gpus
    predicted = float(counted) / item.step_seconds / 1e12
    chosen = (f"b={chosen_layout.micro_batch} v={chosen_layout.interleave} {chosen_layout.recompute} recompute"
              f"{' SP' if chosen_layout.sp else ''} ZeRO-{chosen_layout.zero}; overlap {overlap}")
    return Prediction(row, row["model"], hardware.name, layout_text, row["measured"]["tflops_per_gpu"], predicted,
                      convention, item.step_seconds, item.binding, chosen)


def predict_all(path: Path = DATA) -> list[Prediction]:
    return [predict(row) for row in rows(path)]
