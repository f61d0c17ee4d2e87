"""The ledgers' named quantities — activations, parameters, model states,
FLOPs — registered in :data:`symbolic.core.registry.REGISTRY`.
"""
from __future__ import annotations

from sympy import Add, Expr, Integer, Rational, Symbol, expand, series

from ..core.dims import V, s
from ..core.numeric import UNITS
from ..core.registry import quantity, select_terms
from ..core.tensors import Inventory
from ..layout.strategies import Strategy
from ..models.architectures import ARCHITECTURES
from . import activations, flops, params, states


def _arch(arch: str):
    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {arch!r}; known: {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[arch]


def _strategy(options: dict) -> Strategy:
    """A :class:`Strategy` from keyword options; ``in_flight`` may be a formula
    in the dimension letters (e.g. ``"m"``), read by the guarded parser."""
    from ..core.dims import SYMBOLS
    from ..core.expressions import parse_formula

    options = dict(options)
    if isinstance(options.get("in_flight"), (str, int)):
        options["in_flight"] = parse_formula(str(options["in_flight"]), SYMBOLS)
    return Strategy(**options)


# --- activations -----------------------------------------------------------

@quantity("activations.per_layer", "B")
def _activations_per_layer(arch="gpt", select=None, **strategy) -> Expr:
    """Bytes one GPU saves for one layer and one micro-batch (optionally only
    the terms matching ``select``)."""
    inventory = activations.layer_inventory(_strategy(strategy), _arch(arch).saved_tensors())
    return activations.total_bytes(select_terms(inventory, select))


@quantity("activations.stage", "B")
def _activations_stage(arch="gpt", select=None, **strategy) -> Expr:
    """Bytes of the transformer layers' activations on the stage accounted
    (all L layers without a pipeline; the first stage with one)."""
    strat = _strategy(strategy)
    in_flight, layers = strat.layers_held()
    return in_flight * layers * _activations_per_layer(arch, select, **strategy)


@quantity("activations.output_side", "B")
def _activations_output_side(norm="layernorm", select=None, **strategy) -> Expr:
    """Bytes the output side keeps for one micro-batch — the final norm, the logits' input,
    the fp32 log-softmax, the targets (:func:`symbolic.models.architectures.output.saved_tensors`)
    — under the strategy's dtype and TP/SP sharding (no recompute applies to it), as the bill's
    ``output_side`` lines (optionally only the terms matching ``select``); ``loss``: the loss kernel
    (eager: transformers' on the whole vocabulary; vocab-parallel: Megatron's on a vocabulary shard)."""
    from ..models.architectures import output
    loss = strategy.get("loss", "eager")
    return activations.total_bytes(select_terms(_strategy(strategy).shard(output.saved_tensors(norm=norm, loss=loss)),
                                                select))


@quantity("activations.interleave_factor", "1")
def _interleave_factor(arch="gpt", **strategy) -> Expr:
    """First-stage activations of the interleaved schedule over those of 1F1B."""
    base = dict(strategy, pipeline=True, interleaved=False)
    return _activations_stage(arch, None, **dict(base, interleaved=True)) / _activations_stage(arch, None, **base)


@quantity("activations.selective_saving", "1")
def _selective_saving(arch="gpt", **strategy) -> Expr:
    """Fraction of activation memory selective recompute saves."""
    none = _activations_per_layer(arch, None, **dict(strategy, recompute="none"))
    sel = _activations_per_layer(arch, None, **dict(strategy, recompute="selective"))
    return 1 - sel / none


# --- parameters ------------------------------------------------------------

@quantity("params", "params")
def _params(arch="gpt", tied=None, positions=None, scopes=params.SCOPES, select=None) -> Expr:
    """Parameter count (layer terms × L) over ``scopes``; ``eq2`` scopes are
    ``["layer", "embedding"]``. ``tied``/``positions``: the architecture's
    defaults unless given (GPT: tied, learned; LLaMA: untied, RoPE)."""
    given = {key: value for key, value in (("tied", tied), ("positions", positions)) if value is not None}
    inventory = select_terms(_arch(arch).parameters(**given), select)
    return params.count(inventory, tuple(scopes))


@quantity("params.kaplan", "params")
def _params_kaplan(arch="gpt") -> Expr:
    """Kaplan's N: the layers' weight matrices, no embeddings, biases or norms."""
    return params.non_embedding_weights(_arch(arch).parameters())


# --- model states ----------------------------------------------------------

def _recipe(recipe: str):
    if recipe not in states.RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; known: {', '.join(states.RECIPES)}")
    return states.RECIPES[recipe]


@quantity("states.bytes_per_param", "B")
def _bytes_per_param(recipe="bf16-adam", kind=None) -> Expr:
    """Bytes per parameter of a recipe (or of one ``kind`` of its blocks)."""
    r = _recipe(recipe)
    if r.factored and kind in (None, "optimizer"):
        raise ValueError(f"{recipe}: its factored second moment is not a number of bytes per parameter "
                         "(rows + columns of each matrix); `symbolic bill MODEL --optimizer adafactor` itemises it")
    return Rational(r.bytes_per_param if kind is None else r.bytes_of(kind))


@quantity("states.per_gpu", "B")
def _states_per_gpu(recipe="bf16-adam", zero=0) -> Expr:
    """Model-state bytes per GPU, in Psi, t, p, d."""
    return states.per_gpu(_recipe(recipe), zero)


@quantity("states.experts_per_gpu", "B")
def _states_experts_per_gpu(arch="moe", recipe="bf16-adam", zero=0, expert_parallel=False,
                            expert_tensor_parallel=False, shared_experts=False) -> Expr:
    """Model-state bytes per GPU of a mixture of experts: the dense part (Psi minus
    the routed experts) over t·p, ZeRO over d; the routed experts over e·e_t·p,
    ZeRO over edp = t·d/(e·e_t) (Megatron-Core's expert grid; states.expert_blocks).
    ``expert_parallel``/``expert_tensor_parallel`` off: e = 1, e_t = t."""
    from ..core.dims import e, e_t, t
    from ..layout.experts import routed_expert

    # a composed layer (architectures.composed.register) has its recipe's shared experts, if any
    composed = arch.startswith("composed:")
    inventory = _arch(arch).parameters(**({} if shared_experts or composed else {"shared_experts": 0}))
    experts = params.count(Inventory(tuple(x for x in inventory if routed_expert(x.name))))
    return Add(*states.expert_blocks(_recipe(recipe), zero, experts, expert_parallel=e if expert_parallel else 1,
                                     expert_tensor_parallel=e_t if expert_tensor_parallel else t).values())


# --- FLOPs -----------------------------------------------------------------

@quantity("flops.forward", "FLOPs")
def _flops_forward(arch="gpt", select=None) -> Expr:
    """Forward FLOPs of one micro-batch (L layers and the logits)."""
    return flops.forward(select_terms(_arch(arch).matmuls(), select))


@quantity("flops.layer_forward", "FLOPs")
def _flops_layer_forward(arch="gpt") -> Expr:
    """Forward FLOPs of one layer and one micro-batch."""
    from ..core.dims import L
    return flops.forward(select_terms(_arch(arch).matmuls(), "layer/*")) / L


@quantity("flops.model_training", "FLOPs")
def _flops_model(arch="gpt", select=None) -> Expr:
    """Model FLOPs of one training micro-batch: forward + backward (optionally only
    the matmuls matching ``select``, e.g. ``"layer/*"`` for the L layers alone)."""
    return flops.model_training(select_terms(_arch(arch).matmuls(), select))


@quantity("flops.hardware_training", "FLOPs")
def _flops_hardware(arch="gpt", recompute="none", select=None) -> Expr:
    """Hardware FLOPs of one training micro-batch, recompute included (``select``: as above)."""
    return flops.hardware_training(recompute, select_terms(_arch(arch).matmuls(), select))


@quantity("flops.recompute_ratio", "1")
def _flops_ratio(arch="gpt", recompute="selective") -> Expr:
    """Hardware over model FLOPs under ``recompute``."""
    return _flops_hardware(arch, recompute) / _flops_model(arch)


@quantity("flops.recompute_ratio_leading", "1")
def _flops_ratio_leading(arch="gpt", recompute="selective") -> Expr:
    """The ratio above to first order in s/h and V/(hL) (the papers' "≈",
    valid when 3h ≫ s and 12hL ≫ V)."""
    return leading_order(_flops_ratio(arch, recompute), (s, V))


@quantity("flops.kaplan_forward_per_token", "FLOPs")
def _kaplan_forward(arch="gpt", context=True) -> Expr:
    """Kaplan et al. 2020 Eq 2.2 forward FLOPs per token; ``context=False``
    drops the attention products (the short-context limit)."""
    inventory = _arch(arch).matmuls()
    if not context:
        inventory = Inventory(tuple(mm for mm in inventory if mm.weight), inventory.applied)
    return flops.kaplan_forward_per_token(inventory)


@quantity("flops.kaplan_training_per_token", "FLOPs")
def _kaplan_training(arch="gpt", context=True) -> Expr:
    """Kaplan's training FLOPs per token: forward + backward = 3 × forward."""
    mm = _arch(arch).matmuls()
    backward_over_forward = mm.terms[0].backward_flops / mm.terms[0].forward_flops
    return (1 + backward_over_forward) * _kaplan_forward(arch, context)


@quantity("flops.per_param_per_token", "FLOPs")
def _per_param_per_token(arch="gpt") -> Expr:
    """Kaplan's short-context training FLOPs per token per parameter (the 6 of 6N)."""
    return expand(_kaplan_training(arch, context=False) / _params_kaplan(arch))


@quantity("flops.hardware_per_param_per_token", "FLOPs")
def _hardware_per_param_per_token(arch="gpt", recompute="full") -> Expr:
    """Hardware FLOPs per token per Kaplan parameter, short context, no logits
    (the 8 of "8N/token" under full recompute)."""
    from ..ledgers.flops import per_token
    return leading_order(per_token(_flops_hardware(arch, recompute)) / _params_kaplan(arch), (s, V), order=0)


# --- units -----------------------------------------------------------------

@quantity("unit", "B")
def _unit(unit="GB") -> Expr:
    """The size of a unit in its base unit (GB = 10^9 B, GiB = 2^30 B)."""
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}")
    return Integer(UNITS[unit]) if isinstance(UNITS[unit], int) else UNITS[unit]


def leading_order(expr: Expr, small, order: int = 1) -> Expr:
    """``expr`` to ``order`` in the symbols ``small``, scaled together by ε → 0."""
    eps = Symbol("epsilon", positive=True)
    scaled = expr.xreplace({x: eps * x for x in small})
    return expand(series(scaled, eps, 0, order + 1).removeO().subs(eps, 1))



# --- communication -----------------------------------------------------------

def _collectives(arch="gpt", select=None, exclude=(), zero=0, recompute="none", sequence_parallel=False,
                 pipeline=False, interleaved=False, context_parallel=False, dtype="bf16", recipe="bf16-adam",
                 tied=True):
    """The communication ledger's terms (``symbolic.ledgers.communication.terms``) whose names
    start with ``select`` (a prefix or a list of them) and contain none of ``exclude``."""
    from ..layout.recipes import RECIPES
    from .communication import terms

    module = _arch(arch)
    given = {"tied": tied} if arch == "gpt" else {}
    chosen = RECIPES[recipe]
    collectives = terms(module.parameters(**given), module.saved_tensors(), module.matmuls(),
                        sequence_parallel=sequence_parallel, recompute=recompute, zero=zero, pipeline=pipeline,
                        interleaved=interleaved, context_parallel=context_parallel, dtype=dtype,
                        grad_bytes=chosen.bytes_of("gradients"), param_bytes=chosen.bytes_of("parameters"),
                        gather_bytes=chosen.working_bytes(dtype),
                        tied=tied)
    prefixes = (select,) if isinstance(select, str) else tuple(select or ("",))
    kept = [x for x in collectives if x.name.startswith(prefixes) and not any(part in x.name for part in exclude)]
    if not kept:
        raise ValueError(f"select {select} matches no collective; terms: {', '.join(x.name for x in collectives)}")
    return kept


def _per(expr: Expr, per: str, elements: bool, dtype: str) -> Expr:
    """``iteration`` as derived; ``micro_batch``: one micro-batch per pipeline (B = b·d);
    ``layer_micro_batch``: also one layer per GPU (L = p). ``elements``: in elements of the
    activation dtype's width instead of bytes."""
    from ..core.dims import B, L, b, d, p
    from ..core.tensors import DTYPE_BYTES

    if per not in ("iteration", "micro_batch", "layer_micro_batch"):
        raise ValueError(f"per must be iteration, micro_batch or layer_micro_batch, not {per!r}")
    if per != "iteration":
        expr = expr.xreplace({B: b * d})
    if per == "layer_micro_batch":
        expr = expr.xreplace({L: p})
    # cancel: ZeRO-3's per-module shares of Ψ (count/total) sum back to Ψ only once put over one denominator.
    from sympy import cancel
    return cancel(expr / DTYPE_BYTES[dtype] if elements else expr)


@quantity("communication.traffic", "B")
def _communication_traffic(per="iteration", elements=False, **options) -> Expr:
    """Bytes one rank sends over a ring for the selected collectives: calls × ring factor
    (2(n−1)/n all-reduce, (n−1)/n gather/scatter) × bytes of one call (Narayanan §3's count)."""
    return _per(Add(*(x.traffic for x in _collectives(**options))), per, elements, options.get("dtype", "bf16"))


@quantity("communication.volume", "B")
def _communication_volume(per="iteration", elements=False, **options) -> Expr:
    """ZeRO §7's data movement of the selected collectives: calls × bytes × (2 for an
    all-reduce, 1 for an all-gather or reduce-scatter), no (n−1)/n."""
    return _per(Add(*(x.volume for x in _collectives(**options))), per, elements, options.get("dtype", "bf16"))


@quantity("communication.calls", "1")
def _communication_calls(per="iteration", **options) -> Expr:
    """Calls per iteration (per micro-batch, per layer) of the selected collectives."""
    return _per(Add(*(x.calls for x in _collectives(**options))), per, False, "bf16")
