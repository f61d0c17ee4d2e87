"""Precision as one recipe, the way the frameworks name it: one choice sets the GEMMs' dtype per pass,
what the linear layers save for backward, the weight copies Transformer Engine keeps beside the
parameters, the scaling bookkeeping, and (with the ``--optimizer`` recipe) the master copies.

Read at a commit (every figure below is from these files; nothing is fitted to published runs):

* Transformer Engine (NVIDIA/TransformerEngine @d0067d0d, ``TE`` below):
  ``transformer_engine/common/recipe/__init__.py`` — ``DelayedScaling`` (``fp8_format`` HYBRID,
  ``amax_history_len`` 1024, ``amax_compute_algo`` "max"), ``Float8CurrentScaling`` (HYBRID, per-tensor
  scale from the current amax), ``Float8BlockScaling`` (E4M3; ``x_block_scaling_dim`` 1, ``w_block_scaling_dim``
  2, ``grad_block_scaling_dim`` 1: 1×128 tiles of activations and gradients, 128×128 blocks of weights),
  ``MXFP8BlockScaling`` (E4M3, one E8M0 scale per 32 consecutive values, the tensor and its transpose
  quantised separately), ``NVFP4BlockScaling`` (E2M1 values, one E4M3 scale per 16 values, a per-tensor
  fp32 scale; 16×16 blocks for weights); ``Format.HYBRID`` = E4M3 forward, E5M2 backward.
* TE ``transformer_engine/pytorch/module/linear.py`` @d0067d0d: the weight is quantised with row- and
  column-wise usage when the input needs a gradient, and cached across micro-batches under the name
  ``"weight"`` when ``is_first_microbatch`` is given (``_fp8_workspaces``; not under FSDP2); the saved
  input keeps its column-wise data only ("Discard row-wise data since it is not needed in backward pass").
* TE ``transformer_engine/pytorch/tensor/storage/float8_tensor_storage.py`` and ``utils.py``
  (``is_non_tn_fp8_gemm_supported``: compute capability 10.x or ≥ 13.0): a per-tensor FP8 tensor's
  column-wise data is a separate transposed copy only where FP8 GEMMs take the TN layout alone (Hopper,
  Ada): the "transpose cache".
* TE ``transformer_engine/pytorch/quantization.py`` @d0067d0d: FP8 needs compute capability ≥ 8.9, block
  scaling ≥ 9.0, MXFP8 10.x (not 12.0+), NVFP4 ≥ 10.0 (``_compute_*_support``); delayed scaling keeps
  per GEMM 3 forward and 2 backward quantizers (``module/base.py``: ``num_gemms * 3`` / ``* 2``), each an
  fp32 scale and an ``amax_history_len`` × quantizers fp32 history (``DelayedScalingRecipeState``).
* Megatron-LM (NVIDIA/Megatron-LM @d98e8a64) ``megatron/core/transformer/transformer_config.py``:
  ``fp8_recipe`` default ``"delayed"`` (choices tensorwise, delayed, mxfp8, blockwise), ``--fp8-format``
  e4m3 or hybrid with no default (FP8 off without it), ``fp8_amax_history_len`` 1, ``fp8_wgrad`` True (the
  weight-gradient GEMM in FP8 too); ``fp4_recipe`` ``"nvfp4"`` with ``--fp4-format e2m1``.
* DeepSeek-V3 technical report (arXiv 2412.19437) §3.3: 1×128 activation tiles and 128×128 weight blocks
  with fp32 scales; the embedding, output head, MoE gating, norms and attention kept in BF16/FP32.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

TE = "NVIDIA/TransformerEngine @d0067d0d"
TE_RECIPES = f"{TE} transformer_engine/common/recipe/__init__.py"
TE_LINEAR = f"{TE} transformer_engine/pytorch/module/linear.py (_fp8_workspaces, update_usage)"
MEGATRON_FP8 = "NVIDIA/Megatron-LM @d98e8a64 megatron/core/transformer/transformer_config.py"
DEEPSEEK_V3 = "DeepSeek-V3 technical report (arXiv 2412.19437) §3.3"

#: TE's ``DelayedScaling.amax_history_len`` default (Megatron-Core's own ``fp8_amax_history_len`` is 1).
TE_AMAX_HISTORY_LEN = 1024
#: Quantizers per GEMM under delayed scaling: input, weight, output forward; output and input gradient backward.
DELAYED_QUANTIZERS_PER_GEMM = 3 + 2


@dataclass(frozen=True)
class WeightCopy:
    """One copy of every linear layer's weight that a recipe keeps beside the parameters, per element.

    ``bytes`` per weight element (data and its block scales), ``per_tensor``: bytes per weight matrix on top
    (a per-tensor fp32 scale), ``transpose``: kept only where FP8 GEMMs take the TN layout alone (Hopper,
    Ada; ``Layout.fp8_transpose_cache``)."""

    name: str
    bytes: Fraction
    tally: str                    #: where ``bytes`` comes from, in words
    per_tensor: int = 0
    transpose: bool = False


@dataclass(frozen=True)
class Precision:
    """A training precision recipe: what each pass's GEMMs multiply, what is saved, what weight copies live."""

    name: str
    framework: str                #: the framework's own name of the recipe
    gemm: str                     #: the peak the weight GEMMs run at: ``bf16``, ``fp8`` or ``fp4``
    fprop: str                    #: the forward GEMM's operands (input × weight)
    dgrad: str                    #: the input-gradient GEMM's operands (output gradient × weight)
    wgrad: str                    #: the weight-gradient GEMM's operands (output gradient × input)
    scaling: str                  #: how each tensor is scaled
    saved: str                    #: what a linear layer saves of its input for backward
    weight_copies: tuple = ()     #: :class:`WeightCopy` entries
    amax_history: bool = False    #: delayed scaling's per-GEMM amax history and scales
    min_capability: tuple = (0, 0)     #: the GPU's compute capability TE requires
    below_capability: tuple | None = None  #: and stays below (MXFP8: not on 12.x)
    source: str = ""

    @property
    def low_precision(self) -> bool:
        return self.gemm != "bf16"

    def passes(self) -> dict[str, str]:
        """The GEMM operands per pass (fprop, dgrad, wgrad)."""
        return {"fprop": self.fprop, "dgrad": self.dgrad, "wgrad": self.wgrad}

    def supported_on(self, capability) -> bool:
        """Whether TE runs the recipe on a GPU of ``capability`` (None: not an NVIDIA GPU TE knows)."""
        if not self.low_precision:
            return True
        if capability is None:
            return False
        cap = tuple(capability)
        return cap >= self.min_capability and (self.below_capability is None or cap < self.below_capability)

    def words(self) -> str:
        """``fp8-delayed (TE DelayedScaling: ...)``: the recipe named, as the answer's first lines say it."""
        if not self.low_precision:
            return f"{self.name} ({self.framework})"
        return (f"{self.name} ({self.framework}): fprop {self.fprop}, dgrad {self.dgrad}, wgrad {self.wgrad}; "
                f"{self.scaling}; saved for backward: {self.saved}")


_FP8_DATA = WeightCopy("FP8 weight copy (1 B + an fp32 scale per matrix)", Fraction(1), "1 B E4M3 per element",
                       per_tensor=4)
_FP8_TRANSPOSE = WeightCopy("FP8 weight transpose cache", Fraction(1),
                            "1 B per element: the column-wise copy for dgrad, a transpose where FP8 GEMMs are TN-only",
                            transpose=True)

PRECISIONS: dict[str, Precision] = {r.name: r for r in (
    Precision("bf16", "BF16 mixed precision", "bf16", "bf16 × bf16", "bf16 × bf16", "bf16 × bf16",
              "no scaling", "the input in the activations' dtype", source="Micikevicius et al. 2018; Megatron-LM --bf16"),
    Precision("fp8-delayed", "TE DelayedScaling, format HYBRID", "fp8", "E4M3 × E4M3", "E5M2 × E4M3", "E5M2 × E4M3",
              f"per-tensor scales from an amax history of {TE_AMAX_HISTORY_LEN} steps (TE's default; max of the history)",
              "the FP8 input (1 B/element, an fp32 scale per tensor)",
              (_FP8_DATA, _FP8_TRANSPOSE), amax_history=True, min_capability=(8, 9),
              source=f"{TE_RECIPES} (DelayedScaling); {TE_LINEAR}; {MEGATRON_FP8} (fp8_recipe 'delayed')"),
    # torchao's tensorwise Float8Linear (torchtitan's float8 converter) scales alike but saves the BF16 input and
    # weight for backward (matmul_with_hp_or_float8_args) and caches no FP8 weight: its memory is not this recipe's
    Precision("fp8-current", "TE Float8CurrentScaling, format HYBRID", "fp8",
              "E4M3 × E4M3", "E5M2 × E4M3", "E5M2 × E4M3", "per-tensor scales from each tensor's current amax",
              "the FP8 input (1 B/element, an fp32 scale per tensor)",
              (_FP8_DATA, _FP8_TRANSPOSE), min_capability=(8, 9),
              source=f"{TE_RECIPES} (Float8CurrentScaling); {TE_LINEAR}; {MEGATRON_FP8} (fp8_recipe 'tensorwise')"),
    Precision("fp8-blockwise", "TE Float8BlockScaling (DeepSeek-V3's 1×128 / 128×128)", "fp8",
              "E4M3 × E4M3", "E4M3 × E4M3", "E4M3 × E4M3",
              "fp32 scales per 1×128 tile of activations and gradients, per 128×128 block of weights (power-of-2)",
              "the FP8 input, 1 B/element + an fp32 scale per 1×128 tile (not counted: 3.1% of it)",
              (WeightCopy("FP8 weight, row-wise (128×128 blocks)", 1 + Fraction(4, 128 * 128),
                          "1 B per element + an fp32 scale per 128×128 block"),
               WeightCopy("FP8 weight, column-wise (128×128 blocks)", 1 + Fraction(4, 128 * 128),
                          "1 B per element + an fp32 scale per 128×128 block: the transposed blocks for dgrad")),
              min_capability=(9, 0),
              source=f"{TE_RECIPES} (Float8BlockScaling); {TE_LINEAR}; {DEEPSEEK_V3}; {MEGATRON_FP8} "
                     "(fp8_recipe 'blockwise')"),
    Precision("mxfp8", "TE MXFP8BlockScaling (OCP MX, E4M3)", "fp8", "E4M3 × E4M3", "E4M3 × E4M3", "E4M3 × E4M3",
              "an E8M0 (power-of-2) scale per 32 consecutive values, row- and column-wise quantised apart",
              "the column-wise MXFP8 input (1 B/element + 1 B per 32; scales not counted: 3.1% of it)",
              (WeightCopy("MXFP8 weight, row-wise", 1 + Fraction(1, 32), "1 B per element + an E8M0 scale per 32"),
               WeightCopy("MXFP8 weight, column-wise", 1 + Fraction(1, 32),
                          "1 B per element + an E8M0 scale per 32, quantised along the other axis for dgrad")),
              min_capability=(10, 0), below_capability=(12, 0),
              source=f"{TE_RECIPES} (MXFP8BlockScaling); {TE_LINEAR}; {MEGATRON_FP8} (fp8_recipe 'mxfp8')"),
    Precision("nvfp4", "TE NVFP4BlockScaling (E2M1, E4M3 block scales)", "fp4", "E2M1 × E2M1", "E2M1 × E2M1",
              "E2M1 × E2M1",
              "an E4M3 scale per 16 values (16×16 blocks for weights) and a per-tensor fp32 scale; random Hadamard "
              "transforms on the wgrad operands, stochastic rounding of gradients",
              "the column-wise NVFP4 input (½ B/element + 1 B per 16), counted as 1 B/element (FP8): over by "
              "7/16 B per element",
              (WeightCopy("NVFP4 weight, row-wise", Fraction(1, 2) + Fraction(1, 16),
                          "½ B per element + an E4M3 scale per 16 (stored per 1×16 row)", per_tensor=4),
               WeightCopy("NVFP4 weight, column-wise", Fraction(1, 2) + Fraction(1, 16),
                          "½ B per element + an E4M3 scale per 16, quantised along the other axis", per_tensor=4)),
              min_capability=(10, 0),
              source=f"{TE_RECIPES} (NVFP4BlockScaling); {TE_LINEAR}; {MEGATRON_FP8} (fp4_recipe 'nvfp4')"),
)}

#: The FP8 recipe ``--dtype fp8`` (and ``--fp8-activations``) means: Megatron-Core's default ``fp8_recipe``
#: ("delayed", TE's DelayedScaling) — what a Megatron or NeMo run gets from ``--fp8-format`` alone.
DEFAULT_FP8 = "fp8-delayed"

#: Megatron-LM's ``--fp8-recipe`` values and the recipe each is (``--fp4-format e2m1``: nvfp4).
MEGATRON_RECIPES = {"delayed": "fp8-delayed", "tensorwise": "fp8-current", "blockwise": "fp8-blockwise",
                    "mxfp8": "mxfp8"}


def precision_named(name: str) -> Precision:
    from ..models.config import ConfigError

    if name not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, not {name!r}")
    return PRECISIONS[name]


@dataclass(frozen=True)
class PrecisionChoice:
    """What the user's ``--dtype``, ``--precision`` and ``--fp8-activations`` mean together."""

    dtype: str                   #: the activations' storage dtype the layout keeps
    precision: str               #: the recipe
    note: str = ""               #: how the recipe was read, for the answer's first lines


def read_precision(dtype: str, precision: str | None, fp8_activations: bool = False) -> PrecisionChoice:
    """``--dtype fp8`` is an FP8 training recipe, not FP8 storage of every activation: the default recipe
    (:data:`DEFAULT_FP8`), its linear layers' inputs saved in FP8 and the rest in BF16, as TE keeps them.
    ``--fp8-activations`` (the linear inputs in FP8, FP8 GEMMs) is the same recipe. A ``--precision`` given
    wins; ``bf16`` with ``--dtype fp8`` contradicts it (ConfigError)."""
    from ..models.config import ConfigError

    if precision is not None:
        recipe = precision_named(precision)
        if dtype == "fp8" and not recipe.low_precision:
            raise ConfigError("--dtype fp8 is an FP8 training recipe and --precision bf16 is none: drop one "
                              f"(an FP8 recipe: --precision {DEFAULT_FP8}, fp8-current, fp8-blockwise, mxfp8, nvfp4)")
        if fp8_activations and not recipe.low_precision:
            raise ConfigError("--fp8-activations keeps the linear inputs in FP8 for FP8 GEMMs and --precision bf16 "
                              f"runs none: drop one, or choose an FP8 recipe (--precision {DEFAULT_FP8})")
        if dtype == "fp8":
            return PrecisionChoice("bf16", precision, f"--dtype fp8 with --precision {precision}: the recipe's "
                                   "linear inputs in FP8, the other activations in bf16")
        return PrecisionChoice(dtype, precision, "")
    if dtype == "fp8":
        return PrecisionChoice("bf16", DEFAULT_FP8, f"--dtype fp8 read as the FP8 training recipe {DEFAULT_FP8} "
                               "(Megatron-Core's default fp8_recipe 'delayed', TE DelayedScaling): the linear "
                               "inputs saved in FP8, the other activations in bf16")
    if fp8_activations:
        return PrecisionChoice(dtype, DEFAULT_FP8, f"--fp8-activations read as the FP8 training recipe {DEFAULT_FP8} "
                               "(Megatron-Core's default fp8_recipe 'delayed')")
    return PrecisionChoice(dtype, "bf16", "")


#: What ``plan`` (whose sweeps carry no weight copies) says when it reads ``--dtype fp8`` as the recipe.
PLAN_FP8_NOTE = (f"--dtype fp8 read as the FP8 training recipe {DEFAULT_FP8}: plan prices its FP8 linear inputs and "
                 "GEMMs, not Transformer Engine's weight copies — bill the chosen layout for them")


def plan_dtype(dtype: str, fp8_activations: bool) -> tuple[str, bool, str]:
    """``plan``'s reading of ``--dtype fp8`` (as the bill's, :func:`read_precision`, less the weight copies
    its sweeps do not carry): (activation dtype, FP8 linear inputs and GEMMs, the note to print or "")."""
    if dtype == "fp8":
        return "bf16", True, PLAN_FP8_NOTE
    return dtype, fp8_activations, ""


def on_hardware(layout, hardware):
    """``layout`` for the GPU it is priced on (``hardware``: a ``ledgers.hardware.Hardware``, read by its
    ``name``, ``compute_capability`` and ``peak_fp4_flops``; nothing here imports sympy, so a cached bill stays
    without it): a Blackwell-only recipe (MXFP8, NVFP4) refused on a GPU
    without it, naming the GPU (TE's ``check_mxfp8_support``/``check_nvfp4_support``: compute capability
    10.x, ≥ 10.0), and the per-tensor FP8 transpose cache kept only where FP8 GEMMs are TN-only (TE's
    ``is_non_tn_fp8_gemm_supported``: 10.x or ≥ 13.0 need none). A GPU with no compute capability in its
    file keeps the cache (Hopper's behaviour, the larger). An FP8 recipe on a GPU without FP8 Tensor Cores
    is priced with BF16 GEMMs, said in the time line (``ledgers.time.price``)."""
    from dataclasses import replace

    from ..models.config import ConfigError

    recipe = PRECISIONS[layout.precision]
    if not recipe.low_precision:
        return layout
    capability = hardware.compute_capability
    if recipe.name in ("mxfp8", "nvfp4") and not recipe.supported_on(capability):
        have = (f"compute capability {capability[0]}.{capability[1]}" if capability is not None
                else "no CUDA compute capability in its hardware file")
        need = "10.x (Blackwell B200/B300/GB200/GB300)" if recipe.name == "mxfp8" else "10.0 or above (Blackwell)"
        raise ConfigError(f"precision {recipe.name} needs a GPU of compute capability {need} (Transformer Engine's "
                          f"check_{recipe.name}_support); {hardware.name} has {have}: choose --precision "
                          "fp8-delayed, fp8-current or fp8-blockwise, or --gpu b200")
    if recipe.gemm == "fp4" and not hardware.peak_fp4_flops:
        raise ConfigError(f"precision {recipe.name}: {hardware.name}'s hardware file gives no FP4 peak; give "
                          "peak_fp4_flops in it, or choose an FP8 recipe (--precision mxfp8)")
    tn_only = capability is None or not ((10, 0) <= tuple(capability) < (12, 0) or tuple(capability) >= (13, 0))
    return layout if tn_only == layout.fp8_transpose_cache else replace(layout, fp8_transpose_cache=tn_only)


__all__ = ["on_hardware", "plan_dtype", "PLAN_FP8_NOTE", "Precision", "PrecisionChoice", "WeightCopy", "PRECISIONS", "DEFAULT_FP8", "MEGATRON_RECIPES",
           "TE_AMAX_HISTORY_LEN", "DELAYED_QUANTIZERS_PER_GEMM", "precision_named", "read_precision"]
