"""The precision recipe's model-state terms: the weight copies Transformer Engine keeps beside the
parameters and delayed scaling's amax histories, each a named entry (``layout.precision`` says what each
recipe keeps, read from TE at a commit), sharded as the parameters are.

Which weights: the layers' linear weights — every layer matrix but the MoE router (Megatron-Core's
``TopKRouter`` runs its own GEMM outside TE's autocast) and the hybrids' depthwise convolutions; the
embedding and the output layer stay BF16 (Megatron-Core's output layer is not a TE module unless
``fp8_output_proj`` with MXFP8; DeepSeek-V3 §3.3 keeps the embedding and output head in BF16).

Condition: TE caches the quantised weight across micro-batches (``linear.py``: ``cache_name = "weight"``
when ``is_first_microbatch`` is given, as Megatron-Core gives it — ``megatron/core/extensions/transformer_engine.py``
@d98e8a64 passes it unless ``--disable-parameter-transpose-cache``; not under FSDP2). Under ZeRO-3 (FSDP)
the copy is made per layer as it runs and not kept: no entry.
"""
from __future__ import annotations

from sympy import Add, Expr, Integer, Mul, Rational

from ..core.dims import E, L, t
from ..layout.experts import routed_expert
from ..layout.precision import DELAYED_QUANTIZERS_PER_GEMM, TE_AMAX_HISTORY_LEN, TE_LINEAR, Precision
from .states import StateTerm, _share_axes

#: Layer matrices outside TE's FP8 autocast: the MoE router, the hybrids' depthwise convolutions.
NOT_FP8 = ("layer/moe/router", "layer/conv/conv_weight", "layer/linear_attention/conv_weight")


def fp8_weights(param_inv) -> list:
    """The layer weight matrices TE quantises (the linear layers': the router and convolutions left out)."""
    return [term for term in param_inv
            if term.scope == "layer" and len(term.shape) - _share_axes(term.shape) >= 2
            and not term.name.startswith(NOT_FP8)]


def weight_copy_terms(recipe: Precision, param_inv, *, pipeline: Expr, zero: int, transpose: bool,
                      expert_grid: tuple | None = None, fp8_params: bool = False) -> list[StateTerm]:
    """One :class:`StateTerm` per weight copy of ``recipe`` (and the amax history under delayed scaling),
    per GPU of a stage whose layer terms are divided by ``pipeline`` (``bill.derive.stage_ways``): the dense
    part's weights t·pipeline ways, the routed experts' e·e_t·pipeline ways (``expert_grid`` = (e, e_t); None:
    the dense grid for all). A per-tensor scale and the amax history count per weight matrix a GPU holds
    (an expert bank's E matrices, E/e on a rank). ``transpose``: the GPU's FP8 GEMMs take TN alone.
    ``fp8_params``: the parameters are FP8 already (an ``fp8-*`` optimizer recipe: Megatron's
    ``--fp8-param-gather``, TE's ``fp8_model_init``), so the first (row-wise) copy is the parameter itself."""
    if not recipe.low_precision or zero == 3:
        return []
    weights = fp8_weights(param_inv)
    ep_ways, etp_ways = expert_grid if expert_grid is not None else (Integer(1), t)

    def elements(term) -> Expr:
        ways = ep_ways * etp_ways if routed_expert(term.name) and expert_grid is not None else t
        return L * term.count / (ways * pipeline)

    def matrices(term) -> Expr:
        share = Mul(*term.shape[:-2])        # a hybrid's or a dense-first model's share of the layers
        if routed_expert(term.name):         # a bank (E·h, 2·f_e): E GEMMs (TE GroupedLinear's num_gemms), E/e a rank
            return L * share * E / ((ep_ways if expert_grid is not None else 1) * pipeline)
        return L * share / pipeline

    count = Add(*(elements(term) for term in weights))
    tensors = Add(*(matrices(term) for term in weights))
    grid = "; routed experts e·e_t·p ways (Megatron-Core's expert grid)" if expert_grid is not None else ""
    out = []
    for index, copy in enumerate(recipe.weight_copies):
        if (copy.transpose and not transpose) or (fp8_params and index == 0):
            continue
        size = Rational(copy.bytes.numerator, copy.bytes.denominator) * count + copy.per_tensor * tensors
        out.append(StateTerm(f"{recipe.name}: {copy.name}", size, "parameters", "gpu",
                             f"{recipe.source}",
                             f"{copy.tally}" + (f" + {copy.per_tensor} B per matrix" if copy.per_tensor else "")
                             + "; the layers' linear weights (router, embedding, output layer in BF16), split as "
                               "the parameters; cached across micro-batches (TE _fp8_workspaces)" + grid))
    if recipe.amax_history:
        per_gemm = DELAYED_QUANTIZERS_PER_GEMM * 4 * (TE_AMAX_HISTORY_LEN + 1)
        out.append(StateTerm(f"{recipe.name}: amax histories and scales", per_gemm * tensors, "parameters", "gpu",
                             f"{TE_LINEAR}; DelayedScalingRecipeState (quantization.py)",
                             f"per weight GEMM {DELAYED_QUANTIZERS_PER_GEMM} quantizers × ({TE_AMAX_HISTORY_LEN} "
                             "history + 1 scale) × 4 B (TE's amax_history_len; Megatron-Core sets 1); one GEMM per "
                             "weight matrix (Megatron's fused QKV and FC1 keep fewer)" + grid))
    return out


__all__ = ["fp8_weights", "weight_copy_terms", "NOT_FP8"]
