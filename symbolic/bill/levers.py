"""What would make it fit: the cheapest single levers (and pairs) that bring a bill under the GPU.

Each lever is a change of the layout the bill already models (ZeRO stage, recompute, the fused
attention kernel, a fused optimizer step, FP8 activations, offload, 8-bit Adam; LoRA/QLoRA as a
change of what is trained). Every candidate is billed exactly — the same derivation and verdict —
and kept when its peak fits. The order is seed 004 §10's policy, stated as such: "降显存最划算的顺序：
先用 FSDP / ZeRO 把恒定占用摊薄；再用 recompute / fused kernel 砍 activation 峰值；最后才考虑 FP8 /
offload 这些有数值或带宽代价的手段" — shard the constant first, then recompute or fused kernels,
then FP8 and offload (numerical or bandwidth costs); changing what is trained (LoRA) last. Within a
tier, the smaller new total first. Levers that change the GPU count (more t, p or d) are not
listed: the layout's GPUs are the user's.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import combinations
from collections.abc import Callable

from ..layout.layout import Layout
from ..models.config import ConfigError, ModelConfig
from .evaluate import Bill

POLICY = ("seed 004 §10's order: shard the constant (ZeRO/FSDP) first, then recompute and fused kernels, "
          "then FP8 and offload (numerical or bandwidth costs); LoRA/QLoRA (changes what is trained) last")

#: Tier names, in the policy's order.
TIERS = ("shard the constant", "recompute / fused kernel", "FP8 / offload", "change what is trained")


@dataclass(frozen=True)
class Lever:
    """One change of the layout: its name, tier (index of :data:`TIERS`) and the change (None: n/a)."""

    name: str
    tier: int
    change: Callable[[Layout], Layout | None]


def _when(condition: Callable[[Layout], bool], **fields) -> Callable[[Layout], Layout | None]:
    return lambda layout: replace(layout, **fields) if condition(layout) else None


LEVERS: tuple[Lever, ...] = (
    Lever("ZeRO-1 (optimizer states over d·c)", 0, _when(lambda x: x.zero < 1 and x.dp * x.cp > 1, zero=1)),
    Lever("ZeRO-2 (and gradients)", 0, _when(lambda x: x.zero < 2 and x.dp * x.cp > 1 and x.pp == 1, zero=2)),
    Lever("ZeRO-3 / FSDP (and parameters)", 0, _when(lambda x: x.zero < 3 and x.dp * x.cp > 1 and x.pp == 1,
                                                      zero=3)),
    Lever("fused optimizer step (no fp32 temporaries)", 1,
          _when(lambda x: x.optimizer_impl == "foreach" and x.offload == "none", optimizer_impl="fused")),
    Lever("FlashAttention (no s×s tensor)", 1, _when(lambda x: not x.flash_attention, flash_attention=True)),
    Lever("selective recompute", 1, _when(lambda x: x.recompute == "none", recompute="selective")),
    Lever("full recompute", 1, _when(lambda x: x.recompute != "full", recompute="full")),
    Lever("FP8 activations (storage)", 2, _when(lambda x: x.dtype in ("bf16", "fp16"), dtype="fp8")),
    Lever("8-bit Adam (bitsandbytes)", 2, _when(lambda x: x.optimizer in ("bf16-adam", "bf16-adam-fp32-grads"),
                                                optimizer="adam8bit")),
    Lever("activation offload (saved activations in CPU memory)", 2,
          _when(lambda x: not x.activation_offload, activation_offload=True)),
    Lever("ZeRO-Offload (optimizer states and gradients in CPU memory)", 2,
          _when(lambda x: x.offload == "none", offload="optimizer")),
    Lever("CPU offload of parameters too", 2, _when(lambda x: x.offload != "params" and x.tp == 1 and x.pp == 1,
                                                    offload="params")),
    Lever("LoRA r = 16 (fine-tuning adapters; base frozen)", 3, _when(lambda x: not x.lora, lora=16)),
    Lever("QLoRA r = 16 (NF4 base, double-quantised)", 3, _when(lambda x: not x.lora, lora=16, base_dtype="nf4")),
)


@dataclass
class Fix:
    """A lever (or a pair) that makes the bill fit, with its new numbers and its cost in words."""

    levers: tuple[str, ...]
    tier: int
    layout: Layout
    total_bytes: int | Fraction
    headroom_bytes: int | Fraction
    cost: str

    def as_dict(self) -> dict:
        changed = {name: getattr(self.layout, name) for name in self.layout.__dataclass_fields__}
        return {"levers": list(self.levers), "tier": TIERS[self.tier], "total_bytes": _plain(self.total_bytes),
                "headroom_bytes": _plain(self.headroom_bytes), "cost": self.cost, "layout": changed}


def _plain(value):
    value = Fraction(value)
    return value.numerator if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _bill(model: ModelConfig, layout: Layout, params_hand, gpu_memory, cpu_memory=None) -> Bill:
    from .cache import derivation
    from .evaluate import evaluate
    return evaluate(derivation(model, layout, params_hand), model, layout, params_hand, gpu_memory, cpu_memory)


def cost(before: Bill, after: Bill) -> str:
    """The price of a change, in words: extra hardware FLOPs, PCIe traffic, data-parallel traffic, quality."""
    out = []
    b0, b1 = before.totals, after.totals
    extra = Fraction(b1["flops_per_iteration"]) / Fraction(b0["flops_per_iteration"]) - 1
    if extra > 0:
        out.append(f"+{float(extra) * 100:.1f}% hardware FLOPs (recompute)")
    lay0, lay1 = before.layout, after.layout
    if lay1.zero == 3 > lay0.zero:
        out.append("+50% data-parallel traffic (ZeRO §7: 3Ψ instead of 2Ψ per step)")
    elif lay1.zero > lay0.zero:
        out.append("same data-parallel traffic (reduce-scatter + all-gather = all-reduce, ZeRO §7)")
    if lay1.activation_offload and not lay0.activation_offload:
        out.append("the stage's saved activations cross PCIe twice per step (out in forward, back in backward)")
    if lay1.offload != lay0.offload:
        moved = Fraction(b1.get("cpu_bytes", 0))
        out.append(f"{float(moved) / 1e9:.2f} GB held in CPU memory; gradients and updated weights cross PCIe "
                   "every step (ZeRO-Offload §4)" + (", parameters every layer" if lay1.offload == "params" else ""))
    if lay1.dtype == "fp8" != lay0.dtype:
        out.append("quality: activations stored in FP8 (seed 004 §05.2)")
    if lay1.optimizer == "adam8bit" != lay0.optimizer:
        out.append("quality: 8-bit optimizer states (Dettmers et al. 2021 report parity with 32-bit Adam)")
    if lay1.lora and not lay0.lora:
        out.append("trains rank-16 adapters, not the model" + (" (NF4 base)" if lay1.base_dtype == "nf4" else ""))
    if lay1.flash_attention and not lay0.flash_attention:
        out.append("none in memory; the kernel recomputes Q·Kᵀ in backward")
    if lay1.optimizer_impl == "fused" != lay0.optimizer_impl:
        out.append("none: a fused optimizer kernel (apex/DeepSpeed FusedAdam, torch fused=True)")
    return "; ".join(out) or "none modelled"


def what_would_fit(bill: Bill, params_hand=None, pairs: bool = True, limit: int = 8) -> list[Fix]:
    """The single levers that make ``bill`` fit its ``gpu_memory``, and — when fewer than three singles
    do — the pairs; ordered by :data:`POLICY`, then by the new total. Empty when it fits already or no
    GPU memory was given. With ``--cpu-memory``, an offload that would not fit the CPU memory is left out."""
    gpu = bill.totals.get("gpu_memory_bytes")
    cpu = bill.totals.get("cpu_memory_bytes")
    if gpu is None or bill.totals.get("headroom_bytes", 0) >= 0:
        return []
    model, layout = bill.model, bill.layout
    fixes: list[Fix] = []
    applicable: list[Lever] = []

    def attempt(levers: tuple[Lever, ...]) -> None:
        changed = layout
        for lever in levers:
            changed = lever.change(changed)
            if changed is None:
                return
        try:
            changed.validate(model)
            after = _bill(model, changed, params_hand, gpu, cpu)
        except ConfigError:
            return
        if after.totals["headroom_bytes"] >= 0 and after.totals.get("cpu_headroom_bytes", 0) >= 0:
            fixes.append(Fix(tuple(lever.name for lever in levers), max(lever.tier for lever in levers), changed,
                             after.totals["total_bytes"], after.totals["headroom_bytes"], cost(bill, after)))

    for lever in LEVERS:
        if lever.change(layout) is not None:
            applicable.append(lever)
            attempt((lever,))
    if pairs and len(fixes) < 3:
        singles = {fix.levers[0] for fix in fixes}
        for first, second in combinations(applicable, 2):
            if first.name not in singles and second.name not in singles:  # a pair adds nothing to a single
                attempt((first, second))
    fixes.sort(key=lambda fix: (fix.tier, len(fix.levers), Fraction(fix.total_bytes)))
    return fixes[:limit]
