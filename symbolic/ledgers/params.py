"""Parameter count: the sizes of the parameter tensors, summed.

Megatron's Eq 2 (Narayanan et al. 2021 §5.1) is ``L`` times a layer plus the
embedding; the tests derive it from :func:`symbolic.models.architectures.gpt.parameters`.
"""
from __future__ import annotations

from sympy import Add, Expr

from sympy import Integer

from ..core.dims import L, e, e_t, p, t
from ..core.tensors import Inventory
from ..layout.experts import replicated_over_tensor_parallel, routed_expert

SCOPES = ("layer", "embedding", "output")


def count(inventory: Inventory, scopes=SCOPES) -> Expr:
    """Parameters in ``scopes``; ``layer`` terms are repeated L times."""
    unknown = set(scopes) - set(SCOPES)
    if unknown:
        raise ValueError(f"unknown parameter scope(s) {sorted(unknown)}; use {', '.join(SCOPES)}")
    return Add(*((L if term.scope == "layer" else 1) * term.count
                 for term in inventory if term.scope in scopes))


def eq2_scopes() -> tuple[str, ...]:
    """What Megatron Eq 2 counts: the layers and the (tied) embedding, not the
    final LayerNorm nor an untied output layer."""
    return ("layer", "embedding")


def non_embedding_weights(inventory: Inventory) -> Expr:
    """Kaplan et al. 2020's N (§2.1): the layers' weight matrices only —
    "excluding all vocabulary and positional embeddings", biases and norms
    being sub-leading and dropped. For the GPT layer this is 12 L h²."""
    return L * Add(*(term.count for term in inventory if term.scope == "layer" and len(term.shape) == 2))


def per_gpu(inventory: Inventory, pipeline: bool = False, tensor_parallel: Expr = t, pipeline_parallel: Expr = p,
            expert_parallel: Expr = e, expert_tensor_parallel: Expr = e_t) -> Expr:
    """Parameters one GPU holds, on the first pipeline stage (the stage the bill accounts).

    Megatron-Core's placement, term by term (:mod:`symbolic.layout.experts`):
    a routed expert's weights are split over ``expert_parallel`` ×
    ``expert_tensor_parallel`` ranks (E/e whole experts, f_e/e_t of each one's
    width); a dense-part term over ``tensor_parallel`` unless TP keeps it
    whole (norms, router, row-parallel biases, learned positions:
    :func:`~symbolic.layout.experts.replicated_over_tensor_parallel`). The
    first stage holds L/p layers and the embedding; with ``pipeline`` off
    (p = 1) also the output side (final norm, untied output layer), which a
    pipeline puts on its last stage. Exact when the layers and the split
    widths divide evenly (the layout's validity rules).
    """
    total = []
    for term in inventory:
        if term.scope == "output" and pipeline:
            continue
        if routed_expert(term.name):
            ways = expert_parallel * expert_tensor_parallel
        elif replicated_over_tensor_parallel(term.name):
            ways = Integer(1)
        else:
            ways = tensor_parallel
        repeat = L / pipeline_parallel if term.scope == "layer" else Integer(1)
        total.append(repeat * term.count / ways)
    return Add(*total)
