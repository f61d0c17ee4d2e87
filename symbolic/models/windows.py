"""Sliding-window attention as a family's config declares it: which layers, how wide, and what it costs.

One entry point for every family with windows: a :class:`Rule` says how its config names the
windowed layers, :func:`read` applies it to a config (the window w and the count L_w of windowed
layers, :mod:`symbolic.core.dims`), and :func:`apply` puts them on the recipe (``Recipe.window``),
its letters and its notes. The attention part then bills (``parts.attention_core``,
``composed._window_share``):

- on the bill's fused kernel on CUDA — flash-attn with its native ``window_size``, which HF's
  ``flash_attention_2`` passes (modeling_flash_attention_utils.py:687-692) — Q·Kᵀ and ·V of the
  L_w windowed layers over the window's band (``parts.window_band``: the engine's convention for
  the causal triangle applied to the window), the other L − L_w over the full s×s; flash-attn keeps
  what it keeps without a window (Dao-AILab/flash-attention @0251105a2fb1,
  flash_attn/flash_attn_interface.py:862-869: ``window_size`` goes to the kernel, and
  ``ctx.save_for_backward(q, k, v, out_padded, softmax_lse, rng_state)`` as without one;
  csrc/flash_attn/src/flash_fwd_kernel.h:90: the key blocks left of the window are not visited);
- on HF's eager and SDPA paths (and so on every traced CPU path) the window is a mask: the
  products are the full s×s, as FlopCounterMode counts them; eager keeps nothing more (the mask is
  the model's, built once); SDPA, once the mask is materialised (s ≥ w), runs without native GQA
  and keeps K and V repeated to a heads and a bf16 (b, 1, s, s) mask per layer (the ``masked``
  kernel, traced). :func:`note` states both differences with their size.

A family declares its rule (transformers 5.24.0's configuration and modeling files):

- ``Rule()`` — every layer windowed when ``sliding_window`` is set (Mistral, StarCoder2, Phi-3);
- ``Rule(layer_types=True, default=lambda i, value: ...)`` — the modeling reads ``config.layer_types``
  ("sliding_attention" / "full_attention"), a given list is read, and ``default(i, value)`` is the
  pattern the configuration derives when it is absent (``value(name)``: a field with its default);
- ``gate="use_sliding_window"`` — a flag without which there is no window (Qwen).

A family module sets ``WINDOWS = windows.Rule(...)``; the families :mod:`symbolic.models.hf` reads
itself are in :data:`RULES`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Callable

from .config import ConfigError, Recipe

SLIDING, FULL = "sliding_attention", "full_attention"


@dataclass(frozen=True)
class Rule:
    """How a family's config says which layers attend within a sliding window.

    layer_types: the modeling reads ``config.layer_types`` (else every layer is windowed when the
    window is set). default: (layer index, value) -> windowed, the pattern the configuration derives
    when ``layer_types`` is absent; ``value(name)`` reads a field at the family's default. gate: a
    flag field without which the window is off (``use_sliding_window``)."""

    layer_types: bool = False
    default: Callable | None = None
    gate: str | None = None


@dataclass(frozen=True)
class Windows:
    """A config's windows: ``window`` keys (w) on ``sliding`` (L_w) of its ``layers`` layers."""

    window: int
    sliding: int
    layers: int


def _every(i, value):
    return True


#: The rules of the families :mod:`symbolic.models.hf` reads itself (configuration_<x>.py __post_init__).
RULES: dict[str, Rule] = {
    # MistralAttention/Mixtral/Qwen3-MoE pass config.sliding_window in every layer (modeling_mistral.py:173);
    # Mistral's config ignores layer_types (configuration_mistral.py:87-89 warns)
    "mistral": Rule(),
    "mixtral": Rule(),
    "qwen3_moe": Rule(gate="use_sliding_window"),                         # modeling_qwen3_moe.py:149
    # Qwen2/Qwen3: sliding iff sliding_window set (use_sliding_window) and i >= max_window_layers
    # (configuration_qwen2.py:83-92; configuration_qwen3.py:86-95)
    "qwen2": Rule(True, lambda i, value: i >= value("max_window_layers"), "use_sliding_window"),
    "qwen3": Rule(True, lambda i, value: i >= value("max_window_layers"), "use_sliding_window"),
    # Qwen2-MoE: every other layer below max_window_layers (configuration_qwen2_moe.py:112-118)
    "qwen2_moe": Rule(True, lambda i, value: (i + 1) % 2 == 1 and i < value("max_window_layers"),
                      "use_sliding_window"),
    "gemma2": Rule(True, lambda i, value: (i + 1) % 2 == 1),              # configuration_gemma2.py:94-97
    # configuration_gemma3.py:105-110: the Hub's sliding_window_pattern (6 by default), five sliding then one full
    "gemma3_text": Rule(True, lambda i, value: (i + 1) % (value("sliding_window_pattern") or 6) != 0),
    "phi3": Rule(),                                                         # modeling_phi3.py:247
}

#: The fields a rule may read, with transformers 5.24.0's defaults where a family's DEFAULTS lacks them.
FIELD_DEFAULTS = {"max_window_layers": 28, "use_sliding_window": False}


def rule_of(model_type: str, family=None) -> Rule | None:
    """The family's rule: its module's ``WINDOWS``, or :data:`RULES`."""
    if family is not None:
        return getattr(family, "WINDOWS", None)
    return RULES.get(model_type)


def read(rule: Rule, value: Callable, raw: dict, layers: int, where: str, model_type: str) -> Windows | None:
    """The windows of a config under ``rule`` (``value(name)``: a field at its family's default), or
    None when no layer has one. A ``layer_types`` list is checked (one entry per layer, each
    sliding_attention or full_attention) or refused in one line."""
    window = value("sliding_window")
    if rule.gate is not None and not (value(rule.gate) if value(rule.gate) is not None
                                      else FIELD_DEFAULTS.get(rule.gate, False)):
        return None
    if window is None or window == 0:  # 0: Qwen2-MoE's "no window" as transformers saves it
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ConfigError(f"{where}: sliding_window must be a positive number of tokens (or null), "
                          f"got {json.dumps(window)}")
    if value("use_bidirectional_attention"):
        raise ConfigError(f"{where}: use_bidirectional_attention true on model_type {model_type!r}: a bidirectional "
                          "window (|i − j| < w) is not the causal window this version bills; give false")
    if not rule.layer_types:
        return Windows(window, layers, layers)
    types = raw.get("layer_types")
    if types is None:
        def field(name):
            got = value(name)
            return FIELD_DEFAULTS.get(name) if got is None else got
        sliding = sum(1 for i in range(layers) if rule.default(i, field))
    else:
        if not isinstance(types, list) or len(types) != layers or any(t not in (SLIDING, FULL) for t in types):
            raise ConfigError(f"{where}: layer_types must list one of {SLIDING!r} or {FULL!r} per layer "
                              f"({layers}), got {json.dumps(types)[:120]}")
        sliding = types.count(SLIDING)
    return Windows(window, sliding, layers) if sliding else None


def apply(recipe: Recipe, dims: dict, windows: Windows | None) -> Recipe:
    """``recipe`` with its windowed layers (``Recipe.window``), their letters' values put in ``dims``."""
    if windows is None:
        return recipe
    dims.update(L_w=windows.sliding, w=windows.window)
    return replace(recipe, window=True)


def note(windows: Windows, heads: int, kv_heads: int, width: int, seq: int) -> str:
    """What the bill counts of the windows and what HF's own paths do instead, with its size."""
    from sympy import Integer

    from .architectures.parts import window_band

    w, s, n = windows.window, seq, windows.sliding
    band = int(window_band(Integer(s), Integer(w)))
    flops = 3 * 4 * heads * width * (s * s - band)  # forward and backward, b = 1, one windowed layer
    where = (f"{n} of the {windows.layers} layers" if n < windows.layers else f"all {n} layers")
    cut = (f"at s = {s:,} (the default), b = 1: {flops:,} training FLOPs and "
           f"{4 * s * (heads - kv_heads) * width + 2 * s * s:,} B per windowed layer" if s >= w else
           f"none at the default s = {s:,} ≤ w")
    return (f"sliding-window attention (w = {w:,}) on {where} (L_w): the bill counts flash-attn's native window "
            "(HF flash_attention_2 passes window_size; FlashAttnFunc keeps q, k, v, out and the log-sum-exp as "
            "without one) — Q·Kᵀ and ·V over the window's band s·(2m − 1) − m·(m − 1), m = min(w, s), per head: the "
            "causal triangle's convention (the full s² for full attention) applied to the window. HF's eager and "
            "SDPA paths apply the window as a mask and multiply the full s×s, 12·b·a·d_h·(s² − band) training "
            "FLOPs per windowed layer more, and from s ≥ w SDPA keeps K and V repeated to a heads and a bf16 "
            f"(b, 1, s, s) mask, 4·s·b·(a − g)·d_h + 2·b·s² bytes more (traced, exact in-model); {cut}")
