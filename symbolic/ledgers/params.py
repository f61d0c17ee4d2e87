"""Parameter count: the sizes of the parameter tensors, summed.

Megatron's Eq 2 (Narayanan et al. 2021 §5.1) is ``L`` times a layer plus the
embedding; the tests derive it from :func:`symbolic.models.architectures.gpt.parameters`.
"""
from __future__ import annotations

from sympy import Add, Expr

from ..core.dims import L
from ..core.tensors import Inventory

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
