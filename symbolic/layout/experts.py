"""Expert parallelism (EP) and expert tensor parallelism (ETP) of a mixture of experts.

How Megatron-Core lays the routed experts out (NVIDIA/Megatron-LM at d98e8a6,
``megatron/core/parallel_state.py``, ``initialize_model_parallel``):

* the dense part (attention, norms, router, embeddings, shared experts) lives
  on the dense grid ``tp-cp-dp-pp``: split t ways by TP, p ways by PP,
  replicated over d·c;
* the routed experts live on a second grid over the *same* ranks,
  ``etp-ep-edp-pp``: ``expert_tensor_parallel_size`` (e_t, default = t) splits
  each expert's FFN width, ``expert_model_parallel_size`` (e) splits the
  experts, and the rest is the expert-data-parallel group
  ``edp = world / (e_t·e·p) = t·d·c / (e·e_t)`` ("world_size ... is not
  divisible by expert_tensor_model_pipeline_parallel size" otherwise). The
  context-parallel ranks are folded into the expert grid (``cp=1`` there);
* the distributed optimizer shards the experts' gradients and optimizer
  states over edp (``get_expert_data_parallel_group``), the dense part's over
  the data-parallel group with context parallelism (d·c).

Validity rules (:func:`validate_expert_parallel`): e divides the routed
experts (``megatron/training/arguments.py``: "Number of experts should be a
multiple of expert model parallel_size"), e·e_t divides t·d·c, e_t divides
the expert FFN width. Under TP without SP Megatron-Core refuses to train an
MoE layer (``moe_layer.py``: "MoE and tensor parallelism are enabled without
also enabling sequence parallelism"); this engine keeps that layout as the
dense TP MLP without SP is kept — tokens replicated over the t ranks, each
expert's width split t ways, no gather — so it requires e_t = t there.

This module holds the rules and which parameters the expert grid splits; the
transformation of the saved tensors is :func:`symbolic.layout.strategies.expert_dispatch`.
"""
from __future__ import annotations

from fractions import Fraction
from math import gcd

from ..models.config import ConfigError, ModelConfig, positive_int
from .suggest import dp_for_expert_grid, largest_divisor, try_flags

MEGATRON = "Megatron-Core parallel_state.initialize_model_parallel (expert grid etp-ep-edp-pp)"

#: Parameter-name prefixes of the routed experts' stacked weights (``architectures.moe.parameters``).
ROUTED_EXPERT_PREFIXES = ("layer/moe/experts_",)


def routed_expert(name: str) -> bool:
    """Whether a parameter belongs to the routed experts (split over e·e_t), not the dense part (t)."""
    return name.startswith(ROUTED_EXPERT_PREFIXES)


def replicated_over_tensor_parallel(name: str) -> bool:
    """Whether Megatron-Core keeps a dense-part parameter whole on every TP rank.

    Norm weights and biases (``TENorm``/``LayerNorm``: not TP-split), the
    router (``moe/router.py``: ``weight`` of shape [num_experts, hidden], not
    split), the row-parallel layers' biases (``RowParallelLinear``: the bias is
    added after the reduce, kept whole), the learned position embedding
    (``LanguageModelEmbedding``: a plain ``Embedding``) and Qwen2-MoE's h -> 1
    shared-expert gate. Everything else of the dense part is column- or
    row-parallel or vocabulary-parallel: split t ways.
    """
    leaf = name.rsplit("/", 1)[-1]
    return ("norm" in leaf or "router" in leaf or name == "embedding/position"
            or leaf in ("projection_bias", "fc2_bias", "shared_gate_weight",
                        "output_bias", "down_bias"))  # the composed families' row-parallel biases


def expert_tensor_parallel(layout: "Layout") -> int:
    """e_t: Megatron-Core's ``expert_tensor_parallel_size``, which defaults to the TP size."""
    return layout.etp or layout.tp


def expert_data_parallel(layout: "Layout") -> int:
    """edp = t·d·c / (e·e_t): the ranks holding the same expert shard (parallel_state)."""
    return layout.tp * layout.dp * layout.cp // (layout.ep * expert_tensor_parallel(layout))


def expert_groups(layout: "Layout") -> tuple[tuple[str, int], ...]:
    """The expert grid's communicators beside the dense grid's (Megatron-Core's
    parallel_state builds them apart): the expert-parallel group (the dispatch
    and combine all-to-all, seed 004 §05.4's EP staging), the expert
    tensor-parallel group when e_t ≠ t, and the expert-data-parallel group (the
    experts' gradient reduce) when it differs from the data-parallel one."""
    if layout.ep == 1 and layout.etp in (0, layout.tp):
        return ()
    etp = expert_tensor_parallel(layout)
    edp = expert_data_parallel(layout)
    return ((("expert-parallel all-to-all", layout.ep),)
            + ((("expert tensor-parallel", etp),) if etp != layout.tp else ())
            + ((("expert data-parallel", edp),) if edp != layout.dp else ()))


def validate_expert_parallel(model: ModelConfig, layout: "Layout") -> None:
    """The expert-parallel rules, one :class:`ConfigError` line each (see the module docstring).

    Kept apart from :meth:`Layout.validate` so every consumer (bill, timeline,
    plan, solve) calls the same rules.
    """
    if not model.experts:  # checked first: plan validates many dense layouts
        if layout.ep != 1 or layout.etp not in (0, layout.tp) or layout.moe_capacity != 1:
            raise ConfigError(f"--ep, --etp and --moe-capacity-factor apply to mixture-of-experts models; "
                              f"{model.name} has no routed experts: drop them")
        return
    positive_int("ep", layout.ep)
    if layout.etp:
        positive_int("etp", layout.etp)
    capacity = Fraction(layout.moe_capacity)
    if capacity <= 0:
        raise ConfigError(f"moe capacity factor must be positive, got {layout.moe_capacity}")
    # The busiest expert holds at least the balanced share s·b·k/E (a factor below 1 would drop tokens,
    # which is not modelled) and at most every token, s·b (each token picks k distinct experts): C_f ≤ E/k.
    top_k = model.experts_per_token or 1
    if capacity < 1 or capacity > Fraction(model.experts, top_k):
        raise ConfigError(f"moe capacity factor {capacity} is outside 1..E/k = {model.experts}/{top_k}: the busiest "
                          "expert holds at least the balanced share s·b·k/E and at most every token s·b "
                          "(token dropping below 1 is not modelled)")
    etp = expert_tensor_parallel(layout)
    routed = model.experts
    folded = layout.tp * layout.dp * layout.cp
    if routed % layout.ep:
        fits = largest_divisor(layout.ep, routed, folded // gcd(folded, etp) if folded % etp == 0 else routed)
        raise ConfigError(f"ep ({layout.ep}) must divide the routed experts ({routed}): each expert-parallel "
                          "rank holds E/ep whole experts (Megatron-LM: experts a multiple of ep); "
                          + try_flags(f"--ep {fits or 1}"))
    if folded % (layout.ep * etp):
        dp = dp_for_expert_grid(layout.tp, layout.dp, layout.cp, layout.ep * etp)
        raise ConfigError(f"ep×etp ({layout.ep}×{etp}) must divide tp×dp×cp ({layout.tp}×{layout.dp}×{layout.cp}"
                          f" = {folded}): Megatron-Core folds the expert grid into the tensor, data and context "
                          "ranks of a pipeline stage; choose ep and etp whose product divides it: "
                          + try_flags(f"--dp {dp}", f"--ep {gcd(folded // etp, layout.ep)}" if folded % etp == 0
                                      else "--etp 1"))
    width = model.expert_ffn or model.ffn
    if width and width % etp:
        raise ConfigError(f"expert ffn width ({width}) must be divisible by etp ({etp}); "
                          + try_flags(f"--etp {largest_divisor(etp, width, folded // layout.ep) or 1}"))
    if layout.tp > 1 and not layout.sp and etp != layout.tp:
        raise ConfigError(f"etp ({etp}) differs from tp ({layout.tp}) without sequence parallelism: the TP ranks "
                          "hold the same tokens, so the expert grid would route them twice; add --sp "
                          "(Megatron-Core requires SP for MoE under TP) or set etp = tp; "
                          + try_flags("--sp", f"--etp {layout.tp}"))
