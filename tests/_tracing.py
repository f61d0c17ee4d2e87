"""Shared helpers of the trace tests: import torch/transformers, evaluate declared inventories."""
from __future__ import annotations

import importlib
import os

import pytest
from sympy import Add

from symbolic.core.dims import SYMBOLS
from symbolic.ledgers import activations


def require(name: str):
    """Import ``name``; outside CI a missing package skips, under CI=true it fails."""
    if os.environ.get("CI") == "true":
        return importlib.import_module(name)
    return pytest.importorskip(name, reason=f"{name} is not installed: pip install -e '.[torch]'")


def at(expr, **values) -> int:
    """``expr`` at integer dimension values (papers' letters), as an exact int."""
    value = expr.subs({SYMBOLS[name]: v for name, v in values.items()})
    assert value.is_Integer, (expr, values, value)
    return int(value)


def declared(saved, matmuls, backward_extra=0, **values) -> tuple[int, int, int]:
    """(saved bytes, forward FLOPs, backward FLOPs) of one layer, declared."""
    layer = matmuls.select("layer")
    return (at(activations.total_bytes(saved), **values),
            at(Add(*(mm.forward_flops for mm in layer)), **values),
            at(Add(*(mm.backward_flops for mm in layer)) + backward_extra, **values))


def traced(trace) -> tuple[int, int, int]:
    return trace.saved_bytes, trace.forward_total, trace.backward_total
