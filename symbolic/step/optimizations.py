"""Memory optimisations as strategies on the timeline, each with its
condition (seed 004 §05, §05.6).

Every optimisation changes specific lifetime classes only (``classes``) and
says when it stops paying. They act on :class:`~symbolic.step.timeline.MemoryOptions`
or on the :class:`~symbolic.layout.layout.Layout`, so the timeline, the peak and
the pictures all see the same change.

=====================  ==========================  =========================================
optimisation            classes changed             fails when (seed 004 §05.6)
=====================  ==========================  =========================================
zero / fsdp             constant (+ the optimizer   all-gather slower than the backward compute
                        step's temporaries)
fp8-weights             constant                    —(master weights stay fp32, §05.1)
fp8-optimizer           constant                    swamping: m/v are accumulators (§05.1)
optimizer-offload       constant (+ the optimizer   PCIe transfer longer than the step's compute
                        step's temporaries)
activation-offload      activations                 PCIe transfer longer than a layer's compute
fp8-activations         activations                 accumulated quantities (only write-once/read-once)
flash-attention         activations, transients     — (fused kernel, §05.2)
fused-cross-entropy     transients, activations     — (long vocabularies, V >= 128k in the seed)
=====================  ==========================  =========================================
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from sympy import Expr, Symbol, cancel

from ..core.dims import L, d, p, t
from ..core.tensors import Inventory
from ..layout.layout import Layout
from ..layout.strategies import Strategy, context_parallel  # noqa: F401 (re-exported: seed 004's CP claims)
from ..ledgers import activations as act_ledger
from ..ledgers import flops as flops_ledger
from ..ledgers import states
from .timeline import MemoryOptions

#: One-direction bandwidth of the link an offload uses (bytes/s), and the
#: sustained matmul throughput of the GPU (FLOP/s): not dimensions, the
#: offload conditions' own letters.
link_bandwidth = Symbol("W", positive=True)
gpu_throughput = Symbol("R", positive=True)

#: Bandwidths named by seed 004 §05.1, §05.2 (bytes/s, one direction).
PCIE_GEN5_X16 = 64 * 10**9
NVME = 7 * 10**9


def _fp8_recipe(base: states.Recipe, weights: bool, optimizer: bool) -> states.Recipe:
    blocks = []
    for block in base.blocks:
        if weights and block.kind == "parameters":
            block = states.Block(block.name.replace("bf16", "fp8"), 1, block.kind)
        if optimizer and block.name.startswith("Adam"):
            block = states.Block(block.name.replace("fp32", "fp8"), 1, block.kind)
        blocks.append(block)
    suffix = "+".join(x for x, on in (("fp8 weights", weights), ("fp8 m/v", optimizer)) if on)
    return states.Recipe(f"{base.name}+{suffix.replace(' ', '-')}", tuple(blocks), base.source + "; seed 004 §05.1",
                         base.condition + f"; {suffix} (fp32 master weights kept)")


@dataclass(frozen=True)
class Optimization:
    name: str
    classes: tuple[str, ...]
    condition: str
    source: str
    apply: Callable[[Layout, MemoryOptions], tuple[Layout, MemoryOptions]]


def _with(options: MemoryOptions, name: str, **changes) -> MemoryOptions:
    return replace(options, applied=options.applied + (name,), **changes)


def _zero(layout, options):
    return replace(layout, zero=3), _with(options, "zero-3")


def _fp8_weights(layout, options):
    base = options.recipe_override or states.RECIPES[layout.optimizer]
    return layout, _with(options, "fp8-weights", recipe_override=_fp8_recipe(base, True, False))


def _fp8_optimizer(layout, options):
    base = options.recipe_override or states.RECIPES[layout.optimizer]
    return layout, _with(options, "fp8-optimizer", recipe_override=_fp8_recipe(base, False, True))


def _optimizer_offload(layout, options):
    return layout, _with(options, "optimizer-offload", optimizer_offload=True)


def _activation_offload(layout, options):
    return layout, _with(options, "activation-offload", activation_offload=True)


def _fp8_activations(layout, options):
    return replace(layout, dtype="fp8"), _with(options, "fp8-activations")


def _flash(layout, options):
    return layout, _with(options, "flash-attention", flash_attention=True)


def _fused_ce(layout, options):
    return layout, _with(options, "fused-cross-entropy", fused_cross_entropy=True)


OPTIMIZATIONS: dict[str, Optimization] = {o.name: o for o in (
    Optimization("zero", ("constant", "transients"), "all-gather + reduce-scatter of each layer hide behind its compute "
                 "(fails when the sharding group grows until the all-gather is slower than backward)",
                 "ZeRO §5; seed 004 §05.1, §06.1", _zero),
    Optimization("fp8-weights", ("constant",), "the working weights in FP8, an fp32 master copy kept",
                 "seed 004 §05.1", _fp8_weights),
    Optimization("fp8-optimizer", ("constant",), "Adam m/v in FP8; fails by swamping unless a high-precision "
                 "accumulator is kept", "seed 004 §05.1", _fp8_optimizer),
    Optimization("optimizer-offload", ("constant", "transients"), "optimizer_offload_hidden(): the PCIe round trip of the "
                 "optimizer states fits in the step's compute", "seed 004 §05.1", _optimizer_offload),
    Optimization("activation-offload", ("activations",), "activation_offload_hidden(): each layer's saved "
                 "activations cross PCIe within that layer's compute", "seed 004 §05.2", _activation_offload),
    Optimization("fp8-activations", ("activations",), "saved activations are written once and read once; "
                 "never for accumulated quantities", "seed 004 §05.2, §05.6", _fp8_activations),
    Optimization("flash-attention", ("activations", "transients"), "fused attention: the (b, a, s, s) tensors "
                 "stay in SRAM; the log-sum-exp is saved", "seed 004 §05.2, §07", _flash),
    # activations too: the output side's fp32 log-softmax (kept for backward) is no longer materialised
    Optimization("fused-cross-entropy", ("transients", "activations"), "logits and loss in one kernel, streamed by row",
                 "seed 004 §05.2", _fused_ce),
)}


def apply(names, layout: Layout, options: MemoryOptions = MemoryOptions()) -> tuple[Layout, MemoryOptions]:
    """Apply the optimisations ``names`` in order."""
    for name in names:
        if name not in OPTIMIZATIONS:
            raise ValueError(f"unknown optimisation {name!r}; known: {', '.join(OPTIMIZATIONS)}")
        layout, options = OPTIMIZATIONS[name].apply(layout, options)
    return layout, options


# --- offload conditions: transfer time vs the compute it hides behind ----------

def optimizer_offload_hidden(recipe: states.Recipe = states.RECIPES["bf16-adam"], zero: int = 0,
                             micro_batches: Expr = Symbol("M", positive=True, integer=True)) -> Expr:
    """Condition (as ``lhs <= rhs`` expressed as ``rhs - lhs >= 0``, returned
    as the pair's difference) for optimizer-state offload to be hidden.

    Every step the optimizer blocks go to the CPU and back: 2 × K·Ψ/shards
    bytes over a link of bandwidth W, against the step's compute on the GPU,
    ``M`` micro-batches × training FLOPs / (t p) at throughput R. Returned:
    ``compute_time - transfer_time`` (>= 0 means hidden), in Ψ, the papers'
    letters, W, R.
    """
    from ..core.dims import Psi
    shards = t * p * (d if states.sharded_over_data("optimizer", zero) else 1)
    transfer = 2 * recipe.bytes_of("optimizer") * Psi / shards / link_bandwidth
    compute = micro_batches * flops_ledger.model_training() / (t * p) / gpu_throughput
    return compute - transfer


def activation_offload_hidden(strategy: Strategy = Strategy(tensor_parallel=True)) -> Expr:
    """``compute_time - transfer_time`` for one layer (>= 0: hidden).

    A layer's saved activations (the strategy's per-layer bytes) must cross
    the link while the next layer's forward runs: bytes / W against the
    layer's forward FLOPs / (t R). Seed 004 §05.2: offload must overlap in both
    directions, so the same bound holds for the prefetch in backward.
    """
    layer_flops = cancel(flops_ledger.forward(_layer_matmuls()) / L)
    return layer_flops / t / gpu_throughput - act_ledger.per_layer(strategy) / link_bandwidth


def _layer_matmuls() -> Inventory:
    from ..models.architectures import gpt
    return Inventory(tuple(mm for mm in gpt.matmuls() if mm.scope == "layer"))


__all__ = ["OPTIMIZATIONS", "Optimization", "apply", "optimizer_offload_hidden", "activation_offload_hidden",
           "context_parallel", "link_bandwidth", "gpu_throughput", "PCIE_GEN5_X16", "NVME"]
