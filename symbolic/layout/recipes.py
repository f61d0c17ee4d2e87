"""Model-state recipes: the byte blocks each parameter carries, by optimizer
and precision (Rajbhandari et al. 2019, ZeRO §3.1; seed 001 §3). Plain data —
the sums 16, 18 and 12 bytes/param are properties, never typed in; the
sharding lives in ``symbolic.ledgers.states``.
"""
from __future__ import annotations

from dataclasses import dataclass

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
