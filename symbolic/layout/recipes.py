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

    def working_bytes(self, dtype: str) -> int:
        """Bytes per weight of the copy the GEMMs read and ZeRO-3/FSDP all-gathers, under activations of
        ``dtype``: the stored parameters' width, or the activations' where the stored parameters are
        wider — fp32 parameters computed in bf16 are cast first (FSDP2's ``MixedPrecisionPolicy.
        param_dtype``: torch 2.13.0 ``_fsdp_param.py`` casts the shard to it before the all-gather,
        measured per rank by ``symbolic/per_rank_states.py``; FSDP1's ``MixedPrecision``; autocast) —
        while narrower stored weights (FP8) are read as stored. FP8 activations keep a bf16 working copy:
        their GEMMs cast each weight to FP8 inside the GEMM, a transient (weights stored and gathered in
        FP8, Megatron's ``--fp8-param-gather``, are the ``fp8-adam`` recipes' FP8 parameters)."""
        compute = "bf16" if dtype == "fp8" else dtype
        return min(self.bytes_of("parameters"), STATE_DTYPE_BYTES[compute])

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
    _recipe("bf16-adam-no-master", "Dettmers et al. 2023 (QLoRA) qlora.py (artidoro/qlora: LoRA layers "
            ".to(torch.bfloat16), optim paged_adamw_32bit); HF Trainer with bf16 modules",
            "bf16 weights and gradients, Adam m and v in fp32, no fp32 master copy (the update is applied to the "
            "bf16 weights)",
            ("bf16 parameters", 2, "parameters"), ("bf16 gradients", 2, "gradients"),
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


#: Bytes per element of the storage dtypes a model state is kept in: ``core.tensors.DTYPE_BYTES``'s
#: entries, restated here so the CLI can list recipes without importing sympy (tests/test_states.py
#: checks the two agree).
STATE_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


def _dtype_block(name: str, dtype: str, kind: str) -> Block:
    """A block whose bytes per parameter are its storage dtype's width: the
    recipe's sum falls out of the dtypes, never typed in."""
    return Block(name, STATE_DTYPE_BYTES[dtype], kind)


def _low_precision(name, source, condition, *blocks):
    return Recipe(name, tuple(_dtype_block(*blk) for blk in blocks), source, condition)


_FP8_PARAMS = ("Megatron-LM --fp8-param-gather (Transformer Engine fp8_model_init: the module's weights "
               "stored in FP8, the distributed optimizer's fp32 main params the master copy); seed 004 §05.1")
_DEEPSEEK_V3 = "DeepSeek-V3 technical report (arXiv 2412.19437) §3.3.3 'Low-Precision Optimizer States'"

#: Low-precision model-state recipes (seed 004 §05.1; DeepSeek-V3 report §3.3). Each block names its
#: storage dtype; its bytes per parameter are that dtype's width, so 15, 12, 11, 9 and 14 are sums.
LOW_PRECISION_RECIPES: tuple[Recipe, ...] = (
    _low_precision("fp8-adam", _FP8_PARAMS,
                   "FP8 working weights (the copy forward/backward read and the DP all-gather moves), "
                   "bf16 gradients, fp32 master weights and fp32 Adam m/v; per-tensor FP8 scales neglected",
                   ("fp8 parameters", "fp8", "parameters"), ("bf16 gradients", "bf16", "gradients"),
                   ("fp32 master parameters", "fp32", "optimizer"), ("Adam m (fp32)", "fp32", "optimizer"),
                   ("Adam v (fp32)", "fp32", "optimizer")),
    _low_precision("bf16-adam-bf16-moments", _DEEPSEEK_V3 + "; seed 004 §05.1",
                   "bf16 weights and gradients, fp32 master weights, Adam m/v tracked in bf16",
                   ("bf16 parameters", "bf16", "parameters"), ("bf16 gradients", "bf16", "gradients"),
                   ("fp32 master parameters", "fp32", "optimizer"), ("Adam m (bf16)", "bf16", "optimizer"),
                   ("Adam v (bf16)", "bf16", "optimizer")),
    _low_precision("fp8-adam-bf16-moments", _FP8_PARAMS + "; " + _DEEPSEEK_V3,
                   "FP8 working weights, bf16 gradients, fp32 master weights, Adam m/v in bf16",
                   ("fp8 parameters", "fp8", "parameters"), ("bf16 gradients", "bf16", "gradients"),
                   ("fp32 master parameters", "fp32", "optimizer"), ("Adam m (bf16)", "bf16", "optimizer"),
                   ("Adam v (bf16)", "bf16", "optimizer")),
    _low_precision("fp8-adam-fp8-moments", _FP8_PARAMS,
                   "FP8 working weights, bf16 gradients, fp32 master weights, Adam m/v in FP8 (seed 004 §05.1: "
                   "m/v are accumulators — FP8 swamps small updates unless a high-precision accumulator is kept; "
                   "per-tensor scales neglected)",
                   ("fp8 parameters", "fp8", "parameters"), ("bf16 gradients", "bf16", "gradients"),
                   ("fp32 master parameters", "fp32", "optimizer"), ("Adam m (fp8)", "fp8", "optimizer"),
                   ("Adam v (fp8)", "fp8", "optimizer")),
    _low_precision("deepseek-v3", _DEEPSEEK_V3,
                   "as DeepSeek-V3 trains: bf16 working weights (cast to FP8 per 128×128 block inside each GEMM, "
                   "a transient), gradients kept in fp32 for batch accumulation, fp32 master weights, "
                   "Adam m/v in bf16",
                   ("bf16 parameters", "bf16", "parameters"), ("fp32 gradients", "fp32", "gradients"),
                   ("fp32 master parameters", "fp32", "optimizer"), ("Adam m (bf16)", "bf16", "optimizer"),
                   ("Adam v (bf16)", "bf16", "optimizer")),
)
RECIPES.update({recipe.name: recipe for recipe in LOW_PRECISION_RECIPES})
