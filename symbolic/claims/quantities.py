"""Every named quantity, loaded: the ledgers' and the step's, registered in
:data:`symbolic.core.registry.REGISTRY`, and :func:`evaluate` to ask for one.

``symbolic derive``, the claims and the renderers go through here, so each
sees every name whichever module registered it.
"""
from __future__ import annotations

from sympy import Expr

from ..core.registry import REGISTRY, Quantity, quantity  # noqa: F401 (the registry's surface)
from ..ledgers import quantities as ledger_quantities  # noqa: F401 (registers the ledgers' names)
from ..step import quantities as step_quantities  # noqa: F401 (registers the step's names)


def evaluate(name: str, **options) -> Expr:
    """The expression of quantity ``name`` under ``options``."""
    if name not in REGISTRY:
        raise ValueError(f"unknown quantity {name!r}; known: {', '.join(sorted(REGISTRY))}")
    try:
        return REGISTRY[name].fn(**options)
    except TypeError as error:
        raise ValueError(f"quantity {name!r}: {error}") from None
