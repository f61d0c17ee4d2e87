"""The step every HF ``config.json`` passes through before a family's reader: the
fields under transformers' own spellings, and the checks that span fields.

- **Aliases.** transformers reads some attributes under another name than the
  one its config stores (``attribute_map``: Qwen3-MoE's and Mixtral's
  ``num_experts`` is stored as ``num_local_experts``; GPT-2's ``hidden_size`` as
  ``n_embd``). :func:`canonical` gives the file both spellings, so a reader that
  asks for either finds the value (:data:`hf_attribute_maps.ATTRIBUTE_MAPS`,
  generated from transformers 5.24.0's configuration classes); two spellings
  with different values are refused.
- **Fields that change the model and are not modelled** (:data:`UNMODELLED`):
  refused when set, never ignored (GPT-2's ``add_cross_attention: true`` adds a
  cross-attention block and its norm to every layer).
- **Cross-field checks** (:func:`check_fields`): layer indices within the layer
  count, windows positive, fractions in (0, 1], ``layer_types`` one per layer,
  and symbolic's own ``_symbolic`` metadata an object of strings.

A new family needs nothing here unless it has a field of these kinds; a new
check is one entry in :data:`UNMODELLED` or one line in :func:`check_fields`.
"""
from __future__ import annotations

import json

from .config import ConfigError
from .hf_attribute_maps import ATTRIBUTE_MAPS

#: Fields that add to the model what no family's inventory counts, and what they add (refused when true).
UNMODELLED = {
    "add_cross_attention": "a cross-attention block (and its norm) in every layer, attending to an encoder's output",
    "is_encoder_decoder": "an encoder stack beside the decoder",
}

#: Fields that are fractions in (0, 1] wherever they appear (the share of each head's width rotated by RoPE).
FRACTIONS = ("rotary_pct", "partial_rotary_factor")


def _shown(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def canonical(raw: dict, model_type: str, where: str) -> dict:
    """``raw`` with every ``attribute_map`` pair of ``model_type`` under both spellings
    (a copy; the file's own keys win over nothing), then :func:`check_fields`."""
    out = dict(raw)
    for read_as, stored in ATTRIBUTE_MAPS.get(model_type, {}).items():
        given = {key: out[key] for key in (read_as, stored) if out.get(key) is not None}
        if len(set(map(json.dumps, given.values()))) > 1:
            raise ConfigError(f"{where}: {stored} = {_shown(out[stored])} and {read_as} = {_shown(out[read_as])} are "
                              f"one field of {model_type} (transformers' attribute_map reads {read_as} as {stored}); "
                              "keep one of them")
        if given:
            value = next(iter(given.values()))
            out[read_as] = out[stored] = value
    check_fields(out, where)
    return out


def check_fields(raw: dict, where: str) -> None:
    """The checks that span fields or hold in every family; one :class:`ConfigError` naming the field."""
    meta = raw.get("_symbolic")
    if meta is not None:
        if not isinstance(meta, dict):
            raise ConfigError(f"{where}: _symbolic = {_shown(meta)}: symbolic's own metadata is an object "
                              "(name, source, params_label, ...); remove it or give an object")
        for key in ("name", "source", "params_label"):
            if key in meta and not isinstance(meta[key], str):
                raise ConfigError(f"{where}: _symbolic.{key} = {_shown(meta[key])} must be text")
        if "positions_follow_seq" in meta and not isinstance(meta["positions_follow_seq"], bool):
            raise ConfigError(f"{where}: _symbolic.positions_follow_seq must be true or false")
    for key, adds in UNMODELLED.items():
        value = raw.get(key)
        if value is None or value is False:
            continue
        if value is True:
            raise ConfigError(f"{where}: {key} = true adds {adds}, which this version does not model; the bill "
                              f"would leave it out — remove {key} (or set it false)")
        raise ConfigError(f"{where}: {key} must be true or false, got {_shown(value)}")
    layers = raw.get("num_hidden_layers")
    layers = layers if _is_int(layers) and layers > 0 else None  # the family's reader names a bad count
    only = raw.get("mlp_only_layers")
    if isinstance(only, list) and layers is not None:
        outside = [index for index in only if _is_int(index) and not 0 <= index < layers]
        if outside:
            raise ConfigError(f"{where}: mlp_only_layers holds {_shown(outside)}, outside the layer indices "
                              f"0..{layers - 1}")
    window = raw.get("sliding_window")
    # Qwen2MoeConfig.__post_init__ (configuration_qwen2_moe.py:112, transformers 5.24.0) stores 0 for "no window"
    # when use_sliding_window is false, and save_pretrained writes it: 0 means no window there, and only there
    off = window == 0 and _is_int(window) and raw.get("use_sliding_window") is False
    if window is not None and not (_is_int(window) and window > 0) and not off:
        raise ConfigError(f"{where}: sliding_window must be a positive number of tokens (or null; 0 with "
                          f"use_sliding_window false), got {_shown(window)}")
    for key in FRACTIONS:
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 < value <= 1):
            raise ConfigError(f"{where}: {key} must be a fraction in (0, 1] (the share of each head rotated), "
                              f"got {_shown(value)}")
    types = raw.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or not all(isinstance(kind, str) for kind in types):
            raise ConfigError(f"{where}: layer_types must be a list of layer kinds (text), got {_shown(types)}")
        if layers is not None and len(types) != layers:
            raise ConfigError(f"{where}: layer_types has {len(types)} entries for num_hidden_layers = {layers}: "
                              "give one per layer (transformers refuses the file too)")


def resized(raw: dict, layers: int) -> dict:
    """``raw`` with ``layers`` decoder layers and every field indexed by layer made to agree
    (``trace --hf`` builds models of L and L + 1 layers from one file): the count under its
    family's key, ``first_k_dense_replace`` at most ``layers`` (HF makes layers ``i < k``
    dense: a model of n layers has min(k, n)), ``mlp_only_layers`` and ``moe_layers`` the indices
    below ``layers``, ``no_rope_layers`` its first ``layers`` flags, ``layer_types`` its first
    ``layers`` entries (Gemma 3n's ``intermediate_size`` and ``activation_sparsity_pattern`` lists too, and its
    ``num_kv_shared_layers`` the shared layers among the first ``layers``) — or, when the file has fewer,
    removed: the caller building the HF model (:func:`symbolic.trace.hf_model`) lets
    transformers rebuild its family's default pattern, after checking the file's list is
    that default."""
    out = dict(raw)
    out["n_layer" if out.get("model_type") == "gpt2" else "num_hidden_layers"] = layers
    if _is_int(out.get("first_k_dense_replace")):
        out["first_k_dense_replace"] = min(out["first_k_dense_replace"], layers)
    if isinstance(out.get("mlp_only_layers"), list):
        out["mlp_only_layers"] = [index for index in out["mlp_only_layers"] if not _is_int(index) or index < layers]
    if isinstance(out.get("moe_layers"), list):  # Llama 4: the MoE layers' indices below ``layers``
        out["moe_layers"] = [index for index in out["moe_layers"] if not _is_int(index) or index < layers]
    if isinstance(out.get("no_rope_layers"), list) and len(out["no_rope_layers"]) >= layers:
        out["no_rope_layers"] = out["no_rope_layers"][:layers]  # Llama 4: one RoPE flag per layer
    # Gemma 3n: the per-layer lists keep their first ``layers`` entries, and the KV-shared layers stay the
    # file's last ones counted from the same first shared index (the first ``layers`` layers of the file's model)
    for key in ("intermediate_size", "activation_sparsity_pattern"):
        if out.get("model_type") in ("gemma3n", "gemma3n_text") and isinstance(out.get(key), list) \
                and len(out[key]) >= layers:
            out[key] = out[key][:layers]
    own, shared = raw.get("num_hidden_layers"), out.get("num_kv_shared_layers")
    if out.get("model_type") in ("gemma3n", "gemma3n_text") and _is_int(own) and _is_int(shared):
        out["num_kv_shared_layers"] = max(0, layers - (own - shared))
    types = out.get("layer_types")
    if isinstance(types, list):
        if len(types) >= layers:
            out["layer_types"] = types[:layers]
        else:
            del out["layer_types"]
    return out
