"""What would make it fit: the cheapest single levers and pairs that bring a bill under the GPU.

Each lever is a change of the layout the bill already models (ZeRO stage, TP or EP over the same
GPUs, recompute, the fused attention kernel, a fused optimizer step, FP8 activations, offload, 8-bit
Adam; LoRA/QLoRA as a change of what is trained). Every single lever and every pair of two is billed
exactly — the same derivation and verdict, cached — and kept when its peak fits (a bounded search:
at most n + n(n−1)/2 bills for the n levers that apply, a pair only when neither of its levers fits
alone, since a pair that contains a fitting single only adds a cost).

The order, stated as such: first the tier of seed 004 §10's policy — "降显存最划算的顺序：先用 FSDP /
ZeRO 把恒定占用摊薄；再用 recompute / fused kernel 砍 activation 峰值；最后才考虑 FP8 / offload
这些有数值或带宽代价的手段" — shard the constant first (ZeRO, and TP or EP over the same GPUs), then
recompute or fused kernels, then FP8 and offload (numerical or bandwidth costs); changing what is
trained (LoRA) last. Least invasive first: a fix's levers' tiers, most invasive first, compared
as a sequence — a pair is in the tier of its more invasive lever, after a single of that tier and
ordered by its other lever's tier (ZeRO-3 + full recompute is (1, 0): after full recompute alone,
(1,), before a fused optimizer step + full recompute, (1, 1)). Then the least step-time cost: the
modelled step time of the changed layout on the bill's hardware when it is given
(:func:`what_would_fit`'s ``price``), else its hardware FLOPs; then the smaller new total. So
``--zero 3 --recompute full`` (shard, then recompute) comes before any offload. (The step time
does not price offload's PCIe traffic: the tiers, not the seconds, keep offload late.) Levers that
change the GPU count (more GPUs in t·p·d·c) are not listed: the layout's GPUs are the user's. Each fix carries the flags that make it (:attr:`Fix.flags`): appended to the
command as written, the bill fits.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import combinations
from collections.abc import Callable

from ..layout.layout import Layout
from ..models.config import ConfigError, ModelConfig
from .evaluate import Bill

POLICY = ("seed 004 §10's order: shard the constant (ZeRO/FSDP, TP or EP over the same GPUs) first, then "
          "recompute and fused kernels, then FP8 and offload (numerical or bandwidth costs); LoRA/QLoRA (changes "
          "what is trained) last; a pair after a single of its tier; then the least modelled step time")

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


def _tp_doubled(layout: Layout) -> Layout | None:
    """t doubled and d halved: the same GPUs, with sequence parallelism (Megatron's pairing; Korthikanti
    et al. 2022 §4.2.2). The layout's rules (heads divisible by t, the expert grid) judge it. A layout
    on transformers' eager loss takes a vocabulary-parallel one with TP, as every framework that runs TP
    does (``layout.default_loss``: eager would gather the whole vocabulary on every rank)."""
    if layout.dp % 2:
        return None
    loss = "vocab-parallel" if layout.loss == "eager" else layout.loss
    return replace(layout, tp=2 * layout.tp, dp=layout.dp // 2, sp=True, loss=loss)


def _ep_doubled(layout: Layout) -> Layout | None:
    """e doubled: the routed experts over twice the ranks, folded into the same t·d·c GPUs (the layout's
    expert-grid rule judges it; a dense model refuses it)."""
    return replace(layout, ep=2 * layout.ep)


LEVERS: tuple[Lever, ...] = (
    Lever("ZeRO-1 (optimizer states over d·c)", 0, _when(lambda x: x.zero < 1 and x.dp * x.cp > 1, zero=1)),
    Lever("ZeRO-2 (and gradients)", 0, _when(lambda x: x.zero < 2 and x.dp * x.cp > 1 and x.pp == 1, zero=2)),
    Lever("ZeRO-3 / FSDP (and parameters)", 0, _when(lambda x: x.zero < 3 and x.dp * x.cp > 1 and x.pp == 1,
                                                      zero=3)),
    Lever("TP ×2 over the same GPUs (d halved, sequence parallel)", 0, _tp_doubled),
    Lever("EP ×2 (routed experts over twice the ranks, same GPUs)", 0, _ep_doubled),
    Lever("fused optimizer step (no fp32 temporaries)", 1,
          _when(lambda x: x.optimizer_impl == "foreach" and x.offload == "none", optimizer_impl="fused")),
    Lever("FlashAttention (no s×s tensor)", 1, _when(lambda x: not x.flash_attention, flash_attention=True)),
    Lever("selective recompute", 1, _when(lambda x: x.recompute == "none", recompute="selective")),
    Lever("full recompute", 1, _when(lambda x: x.recompute != "full", recompute="full")),
    # the FP8 recipe ``--dtype fp8`` means (layout.precision): its linear inputs saved in FP8, TE's weight copies
    # kept — it fits where the first saves more than the second adds
    Lever("FP8 training recipe (fp8-delayed: linear inputs saved in FP8, FP8 weight copies kept)", 2,
          _when(lambda x: x.precision == "bf16" and not x.fp8_activations and x.dtype in ("bf16", "fp16"),
                precision="fp8-delayed")),
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
    #: the command-line flags that make the change, appended to the bill's own command (the last wins)
    flags: tuple[str, ...] = ()
    #: the modelled step time of the changed layout, seconds (None: no hardware was given)
    step_seconds: float | None = None
    hardware_flops: int | Fraction = 0

    def as_dict(self) -> dict:
        changed = {name: getattr(self.layout, name) for name in self.layout.__dataclass_fields__}
        return {"levers": list(self.levers), "tier": TIERS[self.tier], "total_bytes": _plain(self.total_bytes),
                "headroom_bytes": _plain(self.headroom_bytes), "cost": self.cost, "flags": " ".join(self.flags),
                "step_seconds": self.step_seconds, "layout": changed}


def flags_for(before: Layout, after: Layout) -> tuple[str, ...]:
    """The command-line flags that turn ``before`` into ``after``: each changed option in
    :data:`symbolic.layout.options.OPTIONS`' spelling (a switch by its flag alone; the levers only turn
    switches on)."""
    from ..layout.options import OPTIONS

    out: list[str] = []
    for name in before.__dataclass_fields__:
        old, new = getattr(before, name), getattr(after, name)
        if old == new:
            continue
        if name == "fp8_activations" and after.precision != "bf16":
            continue   # set by the precision recipe itself (Layout.__post_init__)
        option = OPTIONS[name]
        if option.kind == "flag":
            if bool(new) != bool(option.default):  # (a switch the layout's rules settled off is settled again)
                out.append(option.flag)
        else:
            out += [option.flag, str(new)]
    return tuple(out)


def _plain(value):
    value = Fraction(value)
    return value.numerator if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _bill(model: ModelConfig, layout: Layout, params_hand, gpu_memory, cpu_memory=None) -> Bill:
    from .cache import derivation
    from .evaluate import evaluate
    return evaluate(derivation(model, layout, params_hand), model, layout, params_hand, gpu_memory, cpu_memory)


def cost(before: Bill, after: Bill, seconds: tuple[float, float] | None = None) -> str:
    """The price of a change, in words: the modelled step time (``seconds``: before, after), extra
    hardware FLOPs, PCIe traffic, data-parallel, tensor- and expert-parallel traffic, quality."""
    out = []
    if seconds is not None:
        out.append(f"step {seconds[1]:.3f} s modelled ({(seconds[1] / seconds[0] - 1) * 100:+.1f}% against "
                   f"{seconds[0]:.3f} s)")
    b0, b1 = before.totals, after.totals
    extra = Fraction(b1["flops_per_iteration"]) / Fraction(b0["flops_per_iteration"]) - 1
    if extra > 0:
        out.append(f"+{float(extra) * 100:.1f}% hardware FLOPs (recompute)")
    lay0, lay1 = before.layout, after.layout
    if lay1.zero == 3 > lay0.zero:
        out.append("+50% data-parallel traffic (ZeRO §7: 3Ψ instead of 2Ψ per step)")
    elif lay1.zero > lay0.zero:
        out.append("same data-parallel traffic (reduce-scatter + all-gather = all-reduce, ZeRO §7)")
    if lay1.tp > lay0.tp:
        out.append(f"t = {lay1.tp}, d = {lay1.dp} over the same GPUs: tensor-parallel collectives in every layer")
    if lay1.ep > lay0.ep:
        out.append(f"e = {lay1.ep}: the experts' all-to-all spans {lay1.ep} ranks")
    if lay1.activation_offload and not lay0.activation_offload:
        out.append("the stage's saved activations cross PCIe twice per step (out in forward, back in backward)")
    if lay1.offload != lay0.offload:
        moved = Fraction(b1.get("cpu_bytes", 0))
        out.append(f"{float(moved) / 1e9:.2f} GB held in CPU memory; gradients and updated weights cross PCIe "
                   "every step (ZeRO-Offload §4)" + (", parameters every layer" if lay1.offload == "params" else ""))
    if lay1.dtype == "fp8" != lay0.dtype:
        out.append("quality: activations stored in FP8 (seed 004 §05.2)")
    if lay1.precision != lay0.precision:
        out.append(f"quality: FP8 GEMMs and FP8 saved linear inputs ({lay1.precision}, Transformer Engine)")
    if lay1.optimizer == "adam8bit" != lay0.optimizer:
        out.append("quality: 8-bit optimizer states (Dettmers et al. 2021 report parity with 32-bit Adam)")
    if lay1.lora and not lay0.lora:
        out.append("trains rank-16 adapters, not the model" + (" (NF4 base)" if lay1.base_dtype == "nf4" else ""))
    if lay1.flash_attention and not lay0.flash_attention:
        out.append("none in memory; the kernel recomputes Q·Kᵀ in backward")
    if lay1.optimizer_impl == "fused" != lay0.optimizer_impl:
        out.append("none: a fused optimizer kernel (apex/DeepSpeed FusedAdam, torch fused=True)")
    return "; ".join(out) or "none modelled"


def what_would_fit(bill: Bill, params_hand=None, pairs: bool = True, limit: int = 8,
                   price: Callable[[Layout], float] | None = None) -> list[Fix]:
    """The single levers and the pairs that make ``bill`` fit its ``gpu_memory``, in the module's order
    (:data:`POLICY`: the levers' tiers, then the least step time — ``price(layout)``, the modelled
    seconds of a step, when given, else hardware FLOPs — then the smaller new total); at most
    ``limit``. Empty when it fits already or no GPU memory was given. With ``--cpu-memory``, an offload
    that would not fit the CPU memory is left out. ``price`` is called only for the fixes of the tiers
    that fill ``limit`` (and once for the bill's own layout)."""
    gpu = bill.totals.get("gpu_memory_bytes")
    cpu = bill.totals.get("cpu_memory_bytes")
    if gpu is None or bill.totals.get("headroom_bytes", 0) >= 0:
        return []
    model, layout = bill.model, bill.layout
    fits: list[tuple[tuple[Lever, ...], Layout, Bill]] = []
    seen: set[Layout] = {layout}
    applicable: list[tuple[Lever, Layout]] = []

    def attempt(levers: tuple[Lever, ...]) -> bool:
        """Bill the layout the levers make; keep it when it fits. True: it fits."""
        changed = layout
        for lever in levers:
            changed = lever.change(changed)
            if changed is None:
                return False
        if changed in seen:  # the same layout by another route (ZeRO-1 then ZeRO-3 is ZeRO-3)
            return False
        seen.add(changed)
        try:
            changed = changed.validate(model)
            after = _bill(model, changed, params_hand, gpu, cpu)
        except ConfigError:
            return False
        if after.totals["headroom_bytes"] >= 0 and after.totals.get("cpu_headroom_bytes", 0) >= 0:
            fits.append((levers, changed, after))
            return True
        return False

    fitting: set[str] = set()
    for lever in LEVERS:
        if lever.change(layout) is not None:
            applicable.append(lever)
            if attempt((lever,)):
                fitting.add(lever.name)
    if pairs:
        for first, second in combinations(applicable, 2):
            if first.name not in fitting and second.name not in fitting:  # a pair adds nothing to a single
                attempt((first, second))

    # a fix's tiers, most invasive first: (1,) a single recompute, (1, 0) ZeRO-3 + recompute
    tiers_of = {id(levers): tuple(sorted((lever.tier for lever in levers), reverse=True)) for levers, _, _ in fits}
    before = price(layout) if price is not None and fits else None
    chosen: list[Fix] = []
    for tiers in sorted(set(tiers_of.values())):
        group = []
        for levers, changed, after in fits:
            if tiers_of[id(levers)] != tiers:
                continue
            seconds = price(changed) if price is not None else None
            group.append(Fix(tuple(lever.name for lever in levers), tiers[0], changed, after.totals["total_bytes"],
                             after.totals["headroom_bytes"],
                             cost(bill, after, None if seconds is None else (before, seconds)),
                             flags_for(layout, changed), seconds, after.totals["flops_per_iteration"]))
        group.sort(key=lambda fix: (fix.step_seconds if fix.step_seconds is not None else 0,
                                    Fraction(fix.hardware_flops), Fraction(fix.total_bytes)))
        chosen += group
        if len(chosen) >= limit:
            break
    return chosen[:limit]
