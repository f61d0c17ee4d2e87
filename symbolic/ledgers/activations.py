"""Activation memory: the bytes of the saved tensors, summed.

Korthikanti et al. 2022: Eq 1 (no parallelism), Eq 2 (TP), Eq 4 (TP+SP),
Eq 5 (first pipeline stage), Eq 6 (selective recompute), Table 2. None of
those forms is written here; the tests and ``derivations/`` compare the sums
below against them.
"""
from __future__ import annotations

from sympy import Add, Expr

from ..core.tensors import Inventory
from ..layout.strategies import Strategy
from ..models.architectures import gpt


def layer_inventory(strategy: Strategy = Strategy(), inventory: Inventory | None = None) -> Inventory:
    """The saved tensors one GPU keeps for one layer under ``strategy``."""
    return strategy.apply(gpt.saved_tensors() if inventory is None else inventory)


def total_bytes(inventory: Inventory) -> Expr:
    """Bytes of an inventory of saved tensors: the sum of its terms."""
    return Add(*(term.bytes for term in inventory))


def per_layer(strategy: Strategy = Strategy(), inventory: Inventory | None = None) -> Expr:
    """Bytes one GPU saves for one layer and one micro-batch."""
    return total_bytes(layer_inventory(strategy, inventory))


def stage(strategy: Strategy = Strategy(), inventory: Inventory | None = None) -> Expr:
    """Bytes of the transformer layers' activations on the stage accounted:
    in-flight micro-batch chunks × layers per chunk × bytes per layer
    (Korthikanti Eq 5 with the 1F1B or interleaved schedule)."""
    in_flight, layers = strategy.layers_held()
    return in_flight * layers * per_layer(strategy, inventory)
