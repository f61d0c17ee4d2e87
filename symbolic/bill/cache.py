"""Derived bills cached on disk, so ``symbolic bill`` prints without sympy.

A bill's derivation (:func:`symbolic.bill.derive.derive`) depends only on what
:func:`symbolic.bill.evaluate.derivation_key` names — the model's structure and
the layout's strategy, recipe and ZeRO stage — and its formulas are text. The
first ``bill`` of a kind derives it with sympy and writes it here; later ones
read it back and evaluate it with Fractions (``import sympy`` alone is most of
a cold start). The folder is named by a fingerprint of the package's own files,
so any change to the engine starts afresh.

An entry cannot lie: it carries the package fingerprint that wrote it and the
SHA-256 of its derivation text, and is used only if both match, its key is the
one asked for, and it evaluates at the configuration. Anything else — an entry
edited on disk (a formula ×1000, lines removed), a JSON list, a formula ``1/0``,
missing keys — is discarded with one note on stderr and derived again, so a bad
entry never outlives one run. (The hash guards against damage and edits, not
against someone who rewrites the hash too: the cache folder is the user's own.)
Writes go to a unique temporary file and ``os.replace`` it into place.

Location: ``$SYMBOLIC_CACHE_DIR``, else ``$XDG_CACHE_HOME/symbolic``, else
``~/.cache/symbolic``. ``SYMBOLIC_CACHE=off`` turns it off. A cache that cannot
be read or written is ignored: it only ever saves time.

The entries themselves — location, fingerprint, reading, checking, writing — are
:mod:`symbolic.bill.stored` (no derivation there, so ``make_bill`` may read through them); this module
adds the derivation on a miss.
"""
from __future__ import annotations

from ..layout.layout import Layout
from ..models.config import ModelConfig
from .evaluate import DerivedBill
from .stored import (  # noqa: F401 (the cache's entries, read here by timing, plan and tests)
    ENTRY_MAX_BYTES, PACKAGE, entry_path, fingerprint, folder, read_entry, through, write_entry,
)


def derivation(model: ModelConfig, layout: Layout, params_hand: int | None = None) -> DerivedBill:
    """The derived bill for ``model`` under ``layout``: read from the cache, or
    derived (with sympy) and written to it."""
    return through(model, layout, params_hand, _derive)


def _derive(model: ModelConfig, layout: Layout, params_hand: int | None) -> DerivedBill:
    from .derive import derive  # sympy: only on a miss

    return derive(model, layout, params_hand)
