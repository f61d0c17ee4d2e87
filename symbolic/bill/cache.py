"""Derived bills cached on disk, so ``symbolic bill`` prints without sympy.

A bill's derivation (:func:`symbolic.bill.derive.derive`) depends only on what
:func:`symbolic.bill.evaluate.derivation_key` names — the model's structure and
the layout's strategy, recipe and ZeRO stage — and its formulas are text. The
first ``bill`` of a kind derives it with sympy and writes it here; later ones
read it back and evaluate it with Fractions (``import sympy`` alone is most of
a cold start). The folder is named by a fingerprint of the package's own files,
so any change to the engine starts afresh.

Location: ``$SYMBOLIC_CACHE_DIR``, else ``$XDG_CACHE_HOME/symbolic``, else
``~/.cache/symbolic``. ``SYMBOLIC_CACHE=off`` turns it off. A cache that cannot
be read or written is ignored: it only ever saves time.
"""
from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from ..layout.layout import Layout
from ..models.config import ModelConfig
from .evaluate import DerivedBill, derivation_key

PACKAGE = Path(__file__).resolve().parent.parent  # the symbolic/ package, not this folder


@lru_cache(maxsize=None)
def fingerprint() -> str:
    """A hash of every file of the package: the engine version the cache is for."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".json", ".html", ".toml"):
            digest.update(str(path.relative_to(PACKAGE)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def folder() -> Path | None:
    """Where the cache lives, or None when it is turned off."""
    if os.environ.get("SYMBOLIC_CACHE", "").lower() in ("0", "off", "no", "false"):
        return None
    base = os.environ.get("SYMBOLIC_CACHE_DIR")
    if not base:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "symbolic"
    return Path(base) / fingerprint()


def derivation(model: ModelConfig, layout: Layout, params_hand: int | None = None) -> DerivedBill:
    """The derived bill for ``model`` under ``layout``: read from the cache, or
    derived (with sympy) and written to it."""
    key = json.dumps(derivation_key(model, layout, params_hand), sort_keys=True)
    where = folder()
    path = where / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".json") if where else None
    if path is not None and path.is_file():
        try:
            stored = json.loads(path.read_text())
            if stored.get("key") == key:
                return DerivedBill.from_json(stored["derived"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # unreadable or from an older layout of this file: derive afresh below
    from .derive import derive  # sympy: only on a miss

    derived = derive(model, layout, params_hand)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text(json.dumps({"key": key, "derived": derived.to_json()}))
            partial.replace(path)  # atomic: a concurrent reader sees the old file or the whole new one
        except OSError:
            pass  # a read-only home: the bill is still right, only not cached
    return derived
