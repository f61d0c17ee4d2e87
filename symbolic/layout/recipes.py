"""Model-state recipes: the byte blocks each parameter carries, by optimizer
and precision (Rajbhandari et al. 2019, ZeRO §3.1; seed 001 §3). Plain data —
the sums 16, 18 and 12 bytes/param are properties, never typed in; the
sharding lives in ``symbolic.ledgers.states``.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

KINDS = ("parameters", "gradients", "optimizer")


@dataclass(frozen=True)
class Block:
    """One block of model state: ``bytes`` per parameter, of ``kind``."""

    name: str
    bytes: int | Fraction
    kind: str


@dataclass(frozen=True)
class Recipe:
    name: str
    blocks: tuple[Block, ...]
    source: str
    condition: str
    #: Adafactor: the second moment of each weight matrix is factored into a row and a column vector
    #: (its block's ``bytes`` then apply per row + column entry, not per parameter)
    factored: bool = False

    @property
    def bytes_per_param(self) -> int | Fraction:
        """Bytes per parameter of the per-parameter blocks (a factored block is per row and column, not here)."""
        return sum(block.bytes for block in self.blocks if not (self.factored and "factored" in block.name))

    def bytes_of(self, kind: str) -> int:
        return sum(block.bytes for block in self.blocks if block.kind == kind)

    @property
    def tally(self) -> str:
        if self.factored:
            return ("+".join(str(block.bytes) for block in self.blocks if "factored" not in block.name)
                    + f" = {self.bytes_per_param} + the factored second moment (4 B per row and column)")
        return "+".join(str(block.bytes) for block in self.blocks) + f" = {self.bytes_per_param}"


def _recipe(name, source, condition, *blocks, factored=False):
    return Recipe(name, tuple(Block(*blk) for blk in blocks), source, condition, factored)


#: bitsandbytes' block-wise 8-bit optimizer states: one fp32 absmax per block of 2048 values
#: (Dettmers et al. 2021, arXiv 2110.02861 §2.1, block size 2048).
ABSMAX_PER_PARAM = Fraction(4, 2048)


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
    _recipe("adam8bit", "Dettmers et al. 2021 (8-bit optimizers, arXiv 2110.02861) §2; bitsandbytes Adam8bit",
            "bf16 mixed precision, 8-bit Adam: m and v block-wise quantised (blocks of 2048, fp32 absmax)",
            ("bf16 parameters", 2, "parameters"), ("bf16 gradients", 2, "gradients"),
            ("fp32 master parameters", 4, "optimizer"), ("Adam m (int8)", 1, "optimizer"),
            ("Adam v (uint8)", 1, "optimizer"), ("m and v block absmax (fp32 per 2048)", 2 * ABSMAX_PER_PARAM,
                                                 "optimizer")),
    _recipe("adafactor", "Shazeer & Stern 2018 (Adafactor, arXiv 1804.04235) §3; HF Adafactor (β1 = None)",
            "fp32 training, Adafactor without momentum: the second moment of an n×m matrix factored into "
            "n + m fp32 values, of a vector kept whole",
            ("fp32 parameters", 4, "parameters"), ("fp32 gradients", 4, "gradients"),
            ("second moment, factored (fp32 row + column)", 4, "optimizer"), factored=True),
    _recipe("sgd-momentum", "seed 001 §3; torch.optim.SGD(momentum > 0)", "fp32 training, SGD with momentum",
            ("fp32 parameters", 4, "parameters"), ("fp32 gradients", 4, "gradients"),
            ("momentum (fp32)", 4, "optimizer")),
)}
