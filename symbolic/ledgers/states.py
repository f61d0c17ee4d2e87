"""Model states: bytes per parameter by recipe, sharded by TP, PP and ZeRO.

Rajbhandari et al. 2019 (ZeRO, arXiv 1910.02054) §3.1: mixed-precision Adam
keeps fp16/bf16 parameters and gradients (2Ψ + 2Ψ) and K·Ψ of optimizer states
with K = 12 (fp32 master copy, momentum, variance). The recipes below list the
byte blocks; the 16, 18 and 12 bytes/param of seed 001 §3 are their sums.
"""
from __future__ import annotations

from dataclasses import dataclass

from sympy import Add, Expr, Integer

from ..dims import Psi, d, p, t

KINDS = ("parameters", "gradients", "optimizer")


@dataclass(frozen=True)
class Block:
    """One block of model state: ``bytes`` per parameter, of ``kind``."""

    name: str
    bytes: int
    kind: str


@dataclass(frozen=True)
class Recipe:
    name: str
    blocks: tuple[Block, ...]
    source: str
    condition: str

    @property
    def bytes_per_param(self) -> int:
        return sum(block.bytes for block in self.blocks)

    def bytes_of(self, kind: str) -> int:
        return sum(block.bytes for block in self.blocks if block.kind == kind)

    @property
    def tally(self) -> str:
        return "+".join(str(block.bytes) for block in self.blocks) + f" = {self.bytes_per_param}"


def _recipe(name, source, condition, *blocks):
    return Recipe(name, tuple(Block(*blk) for blk in blocks), source, condition)


RECIPES: dict[str, Recipe] = {r.name: r for r in (
    _recipe("bf16-adam", "ZeRO §3.1; seed 001 §3", "bf16 mixed precision, Adam, fp32 master weights",
            ("bf16 parameters", 2, "parameters"), ("bf16 gradients", 2, "gradients"),
            ("fp32 master parameters", 4, "optimizer"), ("Adam m (fp32)", 4, "optimizer"),
            ("Adam v (fp32)", 4, "optimizer")),
    _recipe("bf16-adam-fp32-grads", "seed 001 §3 (Megatron --main-grads-dtype fp32)",
            "bf16 mixed precision, Adam, gradients kept in fp32",
            ("bf16 parameters", 2, "parameters"), ("fp32 gradients", 4, "gradients"),
            ("fp32 master parameters", 4, "optimizer"), ("Adam m (fp32)", 4, "optimizer"),
            ("Adam v (fp32)", 4, "optimizer")),
    _recipe("bf16-sgd-momentum", "seed 001 §3", "bf16 mixed precision, SGD with momentum, fp32 master weights",
            ("bf16 parameters", 2, "parameters"), ("bf16 gradients", 2, "gradients"),
            ("fp32 master parameters", 4, "optimizer"), ("momentum (fp32)", 4, "optimizer")),
    _recipe("fp32-adam", "seed 001 §3", "fp32 training, Adam",
            ("fp32 parameters", 4, "parameters"), ("fp32 gradients", 4, "gradients"),
            ("Adam m (fp32)", 4, "optimizer"), ("Adam v (fp32)", 4, "optimizer")),
)}

ZERO_STAGES = (0, 1, 2, 3)


def sharded_over_data(kind: str, zero: int) -> bool:
    """Whether ZeRO stage ``zero`` partitions ``kind`` over the data-parallel
    ranks: stage 1 the optimizer states, 2 also gradients, 3 also parameters
    (ZeRO §5; seed 001 §3: "只开 ZeRO-1 时只有 KΨ 被 d 除")."""
    if zero not in ZERO_STAGES:
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, not {zero!r}")
    return KINDS.index(kind) >= 3 - zero


def blocks(recipe: Recipe, zero: int = 0, params: Expr = Psi,
           tensor_parallel: Expr = t, pipeline_parallel: Expr = p, data_parallel: Expr = d) -> dict[str, Expr]:
    """Bytes per GPU of each block of ``recipe``.

    First-order sharding: every tensor is split evenly t·p ways (TP splits each
    weight, PP splits the layers) and ZeRO splits its kinds d ways. Replicated
    LayerNorm/bias parameters and uneven pipeline stages are neglected.
    """
    out = {}
    for block in recipe.blocks:
        ways = tensor_parallel * pipeline_parallel
        if sharded_over_data(block.kind, zero):
            ways = ways * data_parallel
        out[block.name] = Integer(block.bytes) * params / ways
    return out


def per_gpu(recipe: Recipe, zero: int = 0, params: Expr = Psi,
            tensor_parallel: Expr = t, pipeline_parallel: Expr = p, data_parallel: Expr = d) -> Expr:
    """Model-state bytes per GPU: the sum of :func:`blocks`."""
    return Add(*blocks(recipe, zero, params, tensor_parallel, pipeline_parallel, data_parallel).values())
