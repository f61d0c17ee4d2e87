"""The kinds of layer a hybrid model mixes, as the bill's first lines name them.

A hybrid's layers that are not full attention are counted by a letter of their own
(:mod:`symbolic.core.dims`; their terms are shares of the layer's, e.g. L_c/L); the layers no
letter counts are full attention. One entry per kind: a family that adds a kind of layer adds its
letter and phrase here, and the bill shows it ("10 short-convolution + 6 full-attention layers").
"""
from __future__ import annotations

from collections.abc import Mapping

#: letter counting a kind of layer -> the phrase its layers are named by
LAYER_KINDS = {
    "L_c": "short-convolution",  # LFM2's conv layers (models.families.lfm2)
    "L_l": "linear-attention",  # Qwen3-Next's gated DeltaNet layers (models.families.qwen3_next)
}

#: the phrase of the layers no letter of :data:`LAYER_KINDS` counts
FULL_ATTENTION = "full-attention"

#: Mamba2 hybrids' layers (models.families.granitemoehybrid, bamba, nemotron_h): named in the mix like the kinds
#: above, but measured and paged by their families' own rules (``Recipe.mamba``), so not in :data:`LAYER_KINDS`
MAMBA_KINDS = {"L_s": "Mamba2"}


def layer_mix(layers: int, dims: Mapping[str, int]) -> str | None:
    """The layer mix of a model of ``layers`` layers whose letters are ``dims`` (its ``ModelConfig.dims``),
    e.g. "10 short-convolution + 6 full-attention layers"; None for a model of one kind of layer
    (every layer full attention)."""
    if "L_a" in dims:  # Nemotron-H: one block per layer, a Mamba, an attention or an MLP one
        mamba, attention = dims.get("L_s", 0), dims["L_a"]
        return f"{mamba} Mamba2 + {attention} attention + {layers - mamba - attention} MLP blocks"
    if "n_m" in dims and "L_s" not in dims:  # Falcon-H1: both mixers in every layer
        return f"{layers} layers of Mamba2 and attention in parallel"
    kinds = [(dims[letter], phrase) for letter, phrase in {**LAYER_KINDS, **MAMBA_KINDS}.items() if dims.get(letter)]
    if not kinds:
        return None
    full = layers - sum(count for count, _ in kinds)
    words = [f"{count} {phrase}" for count, phrase in kinds] + ([f"{full} {FULL_ATTENTION}"] if full else [])
    return " + ".join(words) + " layers"
