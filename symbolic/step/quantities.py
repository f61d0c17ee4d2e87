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
from .timeline import FP8_TILE, all_to_all_staging, flash_attention

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


@quantity("communication.ep_all_to_all_staging", "B")
def _ep_staging(buffer="dispatch send", sequence_parallel=False, context_parallel=False, capacity=False,
                fp8=False, fp8_tile=FP8_TILE) -> Expr:
    """Bytes of one of the expert-parallel all-to-all's staging buffers per GPU
    (``buffer``: dispatch send/receive, combine send/receive; seed 004 §05.4):
    :func:`symbolic.step.timeline.all_to_all_staging`; ``all`` sums the four."""
    staged = all_to_all_staging(sequence_parallel, context_parallel, capacity, fp8, fp8_tile)
    if buffer == "all":
        return sum((size for _, size in staged), Integer(0))
    matches = [size for name, size in staged if f", {buffer} (" in name]
    if len(matches) != 1:
        raise ValueError("buffer must be one of dispatch send, dispatch receive, combine send, combine receive, all")
    return matches[0]


#: PyTorch's default cuBLAS workspace per handle (``aten/src/ATen/cuda/CublasHandlePool.cpp``,
#: ``parseChosenWorkspaceSize``: ":4096:2:16:8 default, 32MiB for Hopper and Blackwell" — two 4096 KiB
#: and eight 16 KiB chunks, or 4096 KiB × 8 when the compute capability's major is 9, 10 or 12; torch
#: 2.3-2.6 gave 32 MiB to sm_90 only). A CUBLAS_WORKSPACE_CONFIG ":SIZE:COUNT[:SIZE:COUNT]" replaces it.
TORCH_CUBLAS_DEFAULT = {"pre-hopper": ((4096, 2), (16, 8)), "hopper-blackwell": ((4096, 8),)}
#: GPU generations by compute-capability major, as that source tests them.
CUBLAS_GENERATION = {7: "pre-hopper", 8: "pre-hopper", 9: "hopper-blackwell", 10: "hopper-blackwell",
                     12: "hopper-blackwell"}


def _workspace_bytes(chunks) -> Integer:
    return Integer(sum(size * 1024 * count for size, count in chunks))


@quantity("torch.cublas_workspace", "B")
def _cublas_workspace(major=9, config=None) -> Expr:
    """Bytes of one cuBLAS handle's workspace under PyTorch: its default for
    compute capability ``major`` (V100/A100: 7/8 → 8,519,680 B; H100/H200: 9,
    B200: 10 → 32 MiB), or the ``config`` string's ":SIZE_KiB:COUNT" pairs."""
    if config is not None:
        import re
        pairs = re.findall(r":(\d+):(\d+)", str(config))
        if not pairs:
            raise ValueError(f"CUBLAS_WORKSPACE_CONFIG {config!r} has no :SIZE:COUNT pair")
        return _workspace_bytes((int(size), int(count)) for size, count in pairs)
    if major not in CUBLAS_GENERATION:
        raise ValueError(f"compute capability major must be one of {sorted(CUBLAS_GENERATION)}")
    return _workspace_bytes(TORCH_CUBLAS_DEFAULT[CUBLAS_GENERATION[major]])


@quantity("nccl.buffsize_default", "B")
def _nccl_buffsize() -> Expr:
    """The timeline's NCCL_BUFFSIZE (``CommSettings.nccl_buffsize``): NCCL's
    documented default for the Simple protocol, 4 MiB per channel."""
    from .timeline import CommSettings
    return Integer(CommSettings().nccl_buffsize)
