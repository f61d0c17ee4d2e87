"""Named quantities of memory over a step (seed 004), registered in
:data:`symbolic.core.registry.REGISTRY` for the claims and renderers.

Loaded with every other quantity by :mod:`symbolic.claims.quantities`.
"""
from __future__ import annotations

from sympy import Expr, Integer, Rational, cancel

from ..core.registry import quantity, select_terms
from ..layout.strategies import Strategy
from ..ledgers import activations, states
from ..models.architectures import ARCHITECTURES
from .optimizations import _fp8_recipe, context_parallel
from .timeline import flash_attention

#: PCIe transfer rate per lane (GT/s) by generation, and the line code
#: (payload bits per transferred bits) from Gen3 on: 128b/130b.
PCIE_GT_PER_LANE = {3: 8, 4: 16, 5: 32, 6: 64}
PCIE_ENCODING = Rational(128, 130)

#: NCCL's low-latency protocols carry data and flags in the same word:
#: LL sends 4 B of data with a 4 B flag in each 8 B; LL128 120 B of data in
#: each 128 B line (NCCL's ``NCCL_PROTO`` documentation and source,
#: ``src/include/device.h``: NCCL_LL_LINES_PER_THREAD, NCCL_LL128_DATAELEMS
#: = 15 of 16 8-byte elements per thread).
NCCL_PROTOCOL_PAYLOAD = {"LL": Rational(4, 8), "LL128": Rational(120, 128), "Simple": Integer(1)}


@quantity("activations.per_layer_flash", "B")
def _per_layer_flash(arch="gpt", select=None, **strategy) -> Expr:
    """Bytes one GPU saves for one layer under FlashAttention: the (b, a, s, s)
    tensors are gone, the fp32 log-sum-exp (b, a, s) is saved instead."""
    inventory = Strategy(**strategy).apply(flash_attention(ARCHITECTURES[arch].saved_tensors()))
    return activations.total_bytes(select_terms(inventory, select))


@quantity("activations.context_parallel_ratio", "1")
def _cp_ratio(arch="gpt", ways=2, batch_follows=True, **strategy) -> Expr:
    """Per-GPU activations of one layer under context parallelism over
    ``ways`` ranks, over those without it. ``batch_follows``: the global batch
    is fixed, so the ranks taken from data parallelism raise the local batch
    by ``ways`` and the extra micro-batches run concurrently (seed 004 §06.2);
    ``False``: they run one after another (gradient accumulation)."""
    from ..core.dims import b
    inventory = Strategy(**strategy).apply(ARCHITECTURES[arch].saved_tensors())
    base = activations.total_bytes(inventory)
    cp = activations.total_bytes(context_parallel(inventory, Integer(ways)))
    if batch_follows:
        cp = cp.xreplace({b: ways * b})
    return cancel(cp / base)


@quantity("link.pcie_bandwidth", "B")
def _pcie(generation=5, lanes=16, encoding=False) -> Expr:
    """One-direction PCIe bandwidth in bytes/s: GT/s per lane × lanes / 8,
    times 128/130 when ``encoding`` (the line code's payload share)."""
    if generation not in PCIE_GT_PER_LANE:
        raise ValueError(f"PCIe generation must be one of {sorted(PCIE_GT_PER_LANE)}")
    rate = Integer(PCIE_GT_PER_LANE[generation]) * 10**9 * lanes / 8
    return rate * PCIE_ENCODING if encoding else rate


@quantity("nccl.protocol_efficiency", "1")
def _nccl(protocol="LL") -> Expr:
    """Payload share of an NCCL protocol's transfers (LL, LL128, Simple)."""
    if protocol not in NCCL_PROTOCOL_PAYLOAD:
        raise ValueError(f"protocol must be one of {', '.join(NCCL_PROTOCOL_PAYLOAD)}")
    return NCCL_PROTOCOL_PAYLOAD[protocol]


@quantity("states.recipe_bytes_per_param", "B")
def _recipe_bytes(recipe="bf16-adam", fp8_weights=False, fp8_optimizer=False, kind=None, block=None) -> Expr:
    """Bytes per parameter of a recipe after the FP8 optimisations (seed 004
    §05.1); ``kind`` or ``block`` (a block-name prefix) narrows it."""
    if recipe not in states.RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; known: {', '.join(states.RECIPES)}")
    r = states.RECIPES[recipe]
    if fp8_weights or fp8_optimizer:
        r = _fp8_recipe(r, fp8_weights, fp8_optimizer)
    blocks = [x for x in r.blocks if (kind is None or x.kind == kind) and (block is None or x.name.startswith(block))]
    return Integer(sum(x.bytes for x in blocks))
