"""The registry of named quantities: the engine's results, addressable by name.

One registry serves ``symbolic derive``, the claims in ``derivations/`` and
the renderers, so they all ask the engine the same question the same way.
Each quantity takes keyword options and returns an exact sympy expression in
the papers' letters. The ledgers (:mod:`symbolic.ledgers.quantities`) and the
step (:mod:`symbolic.step.quantities`) register into it; this module imports
neither, and :mod:`symbolic.claims.quantities` is where all of them are loaded.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .tensors import Inventory


@dataclass(frozen=True)
class Quantity:
    name: str
    unit: str
    fn: Callable
    doc: str


REGISTRY: dict[str, Quantity] = {}


def quantity(name: str, unit: str):
    """Register the decorated function as quantity ``name`` in ``unit``."""
    def register(fn):
        REGISTRY[name] = Quantity(name, unit, fn, (fn.__doc__ or "").strip())
        return fn
    return register


def select_terms(inventory: Inventory, select) -> Inventory:
    """Keep the terms matching ``select`` (names, prefixes or globs); all if None."""
    if select is None:
        return inventory
    kept = inventory.select(select)
    if not len(kept):
        raise ValueError(f"select {select} matches no term; terms: {', '.join(inventory.names())}")
    return kept
