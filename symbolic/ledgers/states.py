"""Model states: bytes per parameter by recipe, sharded by TP, PP and ZeRO.

Rajbhandari et al. 2019 (ZeRO, arXiv 1910.02054) §3.1: mixed-precision Adam
keeps fp16/bf16 parameters and gradients (2Ψ + 2Ψ) and K·Ψ of optimizer states
with K = 12 (fp32 master copy, momentum, variance). The recipes below list the
byte blocks; the 16, 18 and 12 bytes/param of seed 001 §3 are their sums.
"""
from __future__ import annotations

from sympy import Add, Expr, Integer

from ..core.dims import Psi, d, p, t
from ..layout.choices import ZERO_STAGES
from ..layout.recipes import KINDS, RECIPES, Block, Recipe  # noqa: F401 (re-exported: the ledger's recipes)


def sharded_over_data(kind: str, zero: int) -> bool:
    """Whether ZeRO stage ``zero`` partitions ``kind`` over the data-parallel
    ranks: stage 1 the optimizer states, 2 also gradients, 3 also parameters
    (ZeRO §5; seed 001 §3: "只开 ZeRO-1 时只有 KΨ 被 d 除")."""
    if zero not in ZERO_STAGES:
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, not {zero!r}")
    return KINDS.index(kind) >= 3 - zero


def blocks(recipe: Recipe, zero: int = 0, params: Expr = Psi,
           tensor_parallel: Expr = t, pipeline_parallel: Expr = p, data_parallel: Expr = d,
           context_parallel: Expr = Integer(1)) -> dict[str, Expr]:
    """Bytes per GPU of each block of ``recipe``.

    First-order sharding: every tensor is split evenly t·p ways (TP splits each
    weight, PP splits the layers) and ZeRO splits its kinds d ways. Replicated
    LayerNorm/bias parameters and uneven pipeline stages are neglected.

    Context parallelism (``context_parallel`` = c) replicates the weights on
    its c ranks, so without ZeRO nothing changes; with it, the sharded kinds
    are split over the d·c ranks that hold the same weights: Megatron-LM's
    distributed optimizer and its gradient reduce run on the data-parallel
    group *with* context parallelism (``parallel_state.get_data_parallel_group(
    with_context_parallel=True)``), as DeepSpeed-Ulysses shards ZeRO over
    its sequence-parallel ranks too.
    """
    out = {}
    for block in recipe.blocks:
        ways = tensor_parallel * pipeline_parallel
        if sharded_over_data(block.kind, zero):
            ways = ways * data_parallel * context_parallel
        out[block.name] = Integer(block.bytes) * params / ways
    return out


def per_gpu(recipe: Recipe, zero: int = 0, params: Expr = Psi,
            tensor_parallel: Expr = t, pipeline_parallel: Expr = p, data_parallel: Expr = d,
            context_parallel: Expr = Integer(1)) -> Expr:
    """Model-state bytes per GPU: the sum of :func:`blocks`."""
    return Add(*blocks(recipe, zero, params, tensor_parallel, pipeline_parallel, data_parallel,
                       context_parallel).values())


def expert_blocks(recipe: Recipe, zero: int, expert_params: Expr, params: Expr = Psi,
                  tensor_parallel: Expr = t, pipeline_parallel: Expr = p, data_parallel: Expr = d,
                  context_parallel: Expr = Integer(1), expert_parallel: Expr = Integer(1),
                  expert_tensor_parallel: Expr = t) -> dict[str, Expr]:
    """Bytes per GPU of each block of ``recipe`` for a mixture of experts: the
    dense part and the routed experts apart, each sharded as Megatron-Core does
    (``parallel_state.initialize_model_parallel``; :mod:`symbolic.layout.experts`).

    The dense part, ``params − expert_params``: as :func:`blocks`, t·p ways,
    the kinds ZeRO shards also over d·c. The routed experts, ``expert_params``:
    e·e_t·p ways (e experts' groups, e_t their width, p the layers); the kinds
    ZeRO shards also over the expert-data-parallel group edp = t·d·c/(e·e_t)
    (the distributed optimizer's ``get_expert_data_parallel_group``) — so a
    sharded kind of the experts is t·d·c·p ways whatever e, and only the
    unsharded ones shrink with e. Condition: first order as :func:`blocks`
    (layers and widths split evenly; the dense part's replicated norms neglected).
    """
    dense = blocks(recipe, zero, params - expert_params, tensor_parallel, pipeline_parallel, data_parallel,
                   context_parallel)
    out = {f"{name} (dense part)": expr for name, expr in dense.items()}
    expert_data = tensor_parallel * data_parallel * context_parallel / (expert_parallel * expert_tensor_parallel)
    for block in recipe.blocks:
        ways = expert_parallel * expert_tensor_parallel * pipeline_parallel
        if sharded_over_data(block.kind, zero):
            ways = ways * expert_data
        out[f"{block.name} (routed experts)"] = Integer(block.bytes) * expert_params / ways
    return out
