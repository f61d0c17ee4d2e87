"""Gemma 3n's text model (HF ``model_type`` gemma3n_text; ``gemma3n`` read through its ``text_config``:
google/gemma-3n-E2B, -E4B), as ``modeling_gemma3n.py`` and ``configuration_gemma3n.py`` of transformers
5.24.0 build it (lines cited are modeling_gemma3n.py's unless named).

Gemma3nTextDecoderLayer (:1248-1322), wired in ``architectures.composed._gemma3n_layer`` from the parts
``gemma3n_parts.altup``, ``gemma3n_parts.laurel``, ``gemma3n_parts.gemma3n_norm``, ``gemma3n_parts.per_layer_input``,
``gemma3n_parts.per_layer_input_slice`` and ``gemma3n_parts.gaussian_topk``:

- AltUp (Gemma3nTextAltUp, :976-1073): the layer's input is ``altup_num_inputs`` (n_u) streams of h;
  ``predict`` mixes them by per-token coefficients from a router on the active stream, ``correct`` adds
  the layer's innovation to each stream by per-token coefficients; ``altup_correct_scale`` scales the
  active stream before the per-layer input.
- LAuReL (Gemma3nTextLaurelBlock, :920-935): a rank-``laurel_rank`` (r_l) residual beside attention.
- Per-layer inputs: a table of ``vocab_size_per_layer_input`` (V_p) × L·``hidden_size_per_layer_input``
  (h_p) (:1589-1594) and per_layer_model_projection h → L·h_p with its norm (:1596-1602), built before the
  first layer (:1738-1772); each layer gates its h_p slice in (:1310-1320). The table and projection are
  model-level parameters (billed on the embedding side, with L in their shape); the activations and the
  projection's FLOPs grow by one h_p slice per layer and are billed with each layer — exact over the
  model, measured per layer by the 2 − 1 layer difference.
- KV sharing (configuration_gemma3n.py:206-231, :1165, :1210-1211): the last ``num_kv_shared_layers``
  (L_kv) layers have no k_proj, v_proj, k_norm, v_norm and reuse the K and V of the last earlier layer of
  their type: no K, V parameters, matmuls, norms; on the fused kernel nothing of K, V kept (HF's eager path
  keeps its repeat_kv copies).
- ``activation_sparsity_pattern`` (:952-953, :959-973): on a layer whose entry is > 0 the MLP's gate output
  is cut at mean + std·Φ⁻¹(sparsity) per token (relu): the Gaussian top-k keeps about 1 − sparsity of the
  gate's activations nonzero (5 % at 0.95) — the matmuls stay dense (no FLOP saved); it keeps the std and the
  relu output (L_sp layers; default the first 10 when L > 10, configuration_gemma3n.py:145-149).
- ``layer_types`` (default every 5th full, the others sliding; configuration_gemma3n.py:140-143): HF
  applies ``sliding_window`` as a mask, so a sliding layer keeps and multiplies what a full one does on the
  traced path (stated; with s > window, HF's SDPA path on CPU keeps more: stated by :func:`read`).
- Gemma3nRMSNorm (:118-136) on Q, K (per head, with weights) and V (per head, no weight), scaling 1.
- ``final_logit_softcapping`` (:1838-1841) on the output side (stated).
"""
from dataclasses import replace

from ..config import Recipe
from .base import Read, no_attention_dropout, source

MODEL_TYPE = "gemma3n_text"
TITLE = "Gemma 3n (text)"
SOURCE = source("gemma3n")

#: configuration_gemma3n.py's Gemma3nTextConfig defaults of the fields read (:95-126)
DEFAULTS = {"intermediate_size": 16384, "max_position_embeddings": 32768, "num_key_value_heads": 2, "head_dim": 256,
            "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True, "attention_bias": False,
            "attention_dropout": 0.0, "sliding_window": 512, "layer_types": None, "final_logit_softcapping": 30.0,
            "vocab_size_per_layer_input": 262144, "hidden_size_per_layer_input": 256, "altup_active_idx": 0,
            "altup_coef_clip": 120.0, "altup_correct_scale": True, "altup_num_inputs": 4,
            "num_kv_shared_layers": 15, "laurel_rank": 64, "activation_sparsity_pattern": None}

LAYER_KINDS = ("sliding_attention", "full_attention")
#: activations whose function keeps only its input (the sparse layer's relu output is that input)
ACTIVATIONS = ("gelu_pytorch_tanh", "gelu", "silu")


def _number(fields, name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fields.refuse(name, value, f"{name} as a number")
    return float(value)


def ffn_width(fields) -> int:
    """``intermediate_size``: one width, or a list of one per layer (configuration_gemma3n.py:130-138)."""
    value = fields.value("intermediate_size")
    if isinstance(value, list):
        if len(value) != fields.layers:
            fields.refuse("intermediate_size", value, f"one width per layer ({fields.layers})")
        if len(set(value)) != 1:
            fields.refuse("intermediate_size", value, "one MLP width for every layer (per-layer widths, MatFormer "
                          "slices, would need a width per layer kind)")
        return _count_of(fields, "intermediate_size", value[0])
    return fields.count("intermediate_size")


def _count_of(fields, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        fields.refuse(name, value, f"{name} as positive integers")
    return value


def layer_types(fields) -> list:
    """``layer_types`` as Gemma3nTextConfig.__post_init__ fills it (every 5th layer full)."""
    types = fields.value("layer_types")
    if types is None:
        return ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(fields.layers)]
    if not isinstance(types, list) or len(types) != fields.layers or any(kind not in LAYER_KINDS for kind in types):
        fields.refuse("layer_types", types, f"one of {', '.join(LAYER_KINDS)} per layer ({fields.layers})")
    return types


def sparse_layers(fields) -> int:
    """Layers with ``activation_sparsity_pattern`` > 0 (configuration_gemma3n.py:145-155: default 0.95 on
    the first 10 when L > 10)."""
    pattern = fields.value("activation_sparsity_pattern")
    if pattern is None:
        return 10 if fields.layers > 10 else 0
    if isinstance(pattern, (int, float)) and not isinstance(pattern, bool):
        pattern = [pattern]  # HF's type allows one number; its check then wants one per layer
    if not isinstance(pattern, list) or len(pattern) != fields.layers:
        fields.refuse("activation_sparsity_pattern", pattern, f"one sparsity per layer ({fields.layers})")
    values = [_number(fields, "activation_sparsity_pattern", x) for x in pattern]
    if any(not 0 <= x < 1 for x in values):
        fields.refuse("activation_sparsity_pattern", pattern, "sparsities in [0, 1) (Φ⁻¹ of 1 is infinite)")
    return sum(1 for x in values if x > 0)


def kv_shared_layers(fields, types: list) -> int:
    """``num_kv_shared_layers``, checked as Gemma3nTextConfig.kv_sharing_modes checks it (:206-231): every
    layer type of the model produced by a layer before the shared ones."""
    shared = fields.value("num_kv_shared_layers")
    if shared is None or shared == 0:
        return 0
    shared = fields.count("num_kv_shared_layers")
    if shared >= fields.layers:
        fields.refuse("num_kv_shared_layers", shared, f"fewer KV-shared layers than layers ({fields.layers})")
    if set(types[:fields.layers - shared]) != set(types):
        fields.refuse("num_kv_shared_layers", shared, "KV-shared layers whose layer types an earlier layer "
                      "produces (HF: 'The set of layer types producing a cache is different')")
    return shared


def read(fields) -> Read:
    layers, hidden, heads = fields.layers, fields.hidden, fields.heads
    if hidden % heads:  # Gemma3nTextConfig.validate_architecture
        fields.refuse("num_attention_heads", heads, f"heads that divide hidden_size ({hidden})")
    no_attention_dropout(fields, 'Gemma 3n')
    streams = fields.count("altup_num_inputs")
    if streams < 2:
        fields.refuse("altup_num_inputs", streams, "at least 2 AltUp streams (with one, the per-layer input reaches "
                      "no output)")
    active = fields.value("altup_active_idx")
    if isinstance(active, bool) or not isinstance(active, int) or not 0 <= active < streams:
        fields.refuse("altup_active_idx", active, f"a stream index in 0..{streams - 1}")
    # a number (HF's strict config refuses null): the correct step keeps the clamped n_u × n_u weight in training
    _number(fields, "altup_coef_clip", fields.value("altup_coef_clip"))
    correct_scale = fields.flag("altup_correct_scale")
    ffn = ffn_width(fields)
    types = layer_types(fields)
    sliding = sum(1 for kind in types if kind == "sliding_attention")
    shared = kv_shared_layers(fields, types)
    sparse = sparse_layers(fields)
    bias = fields.flag("attention_bias")
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias,
                    activation=fields.activation("hidden_activation", ACTIVATIONS), altup=True,
                    altup_correct_scale=correct_scale, kv_shared_layers=shared > 0, sparse_layers=sparse > 0)
    kv_heads, head_dim = fields.count("num_key_value_heads", heads), fields.count("head_dim")
    if shared and kv_heads == heads:
        recipe = replace(recipe, kv_shared_unrepeated=True)
    width = fields.count("hidden_size_per_layer_input")
    dims = {"n_u": streams, "r_l": fields.count("laurel_rank"), "h_p": width,
            "V_p": fields.count("vocab_size_per_layer_input")}
    if shared:
        dims["L_kv"] = shared
    if sparse:
        dims["L_sp"] = sparse
    window = fields.value("sliding_window")
    notes = [
        f"layer_types: {sliding} sliding-window + {layers - sliding} full-attention layers, each billed as a "
        f"full-attention layer (HF applies sliding_window {window} as a mask: the traced layer keeps and multiplies "
        "what a full one does). With s > sliding_window, HF's SDPA path passes that mask to the kernel, which then "
        "keeps it and K, V copied to a heads: 4·s·b·(a − g)·d_h + 2·b·s² bytes more per sliding layer (4·s·b·a·d_h "
        "+ 2·b·s² on a KV-shared one; traced); eager attention is exact at any s",
        f"per-layer inputs (a {dims['V_p']:,} × {layers}·{width} table and an h × {layers}·{width} projection, "
        "model-level): their parameters are billed on the embedding side; the per-layer slices of their activations "
        f"((10·h_p + 8)·s·b = {10 * width + 8:,}·s·b bytes per layer) and of the projection's FLOPs (2·s·b·h·h_p "
        "per layer) are billed with each layer — exact over the model; HF computes them before the first layer, "
        "so under pipeline parallelism (pp > 1) they sit on the first stage, not spread over the stages; and a "
        f"stage boundary then carries the {streams} AltUp streams (n_u·s·b·h) and the later layers' per-layer "
        "inputs, where the pipeline's sends are billed for s·b·h",
        f"AltUp's model-level activations, outside the layers, are not counted: the embeddings (kept by the "
        "per-layer projection and the first magnitude), each extra stream's projection and magnitude at the model's "
        "input and at its output, and the last layer's n_u streams — (10·n_u − 6)·h + 8·n_u bytes per token "
        f"({(10 * streams - 6) * hidden + 8 * streams:,} B; traced); the final norm is Gemma3nRMSNorm, which keeps "
        f"2·h + 4 bytes per token more than the output side's RMSNorm ({2 * hidden + 4:,} B); the AltUp projections' "
        f"{2 * (streams - 1)} h × h matrices are counted as parameters and FLOPs",
    ]
    rank, vocab_p = dims["r_l"], dims["V_p"]
    unplanned = (vocab_p * layers * width + layers * hidden * width + 2 * (streams - 1) * hidden * hidden
                 + layers * (2 * hidden * (rank + width) + hidden + streams ** 2 + streams ** 3))
    notes.append("under tensor parallelism (t > 1) the per-layer embedding, its projection, the AltUp projections and "
                 "each layer's LAuReL, per-layer-input and AltUp coefficient matrices are billed split t ways, as the "
                 "layout splits a dense matrix; HF's gemma3n tp_plan (configuration_gemma3n.py:77-88) splits only the "
                 "attention and the MLP and keeps these whole on every rank: (1 − 1/t) × "
                 f"{unplanned:,} parameters per GPU more there (V_p·L·h_p + L·h·h_p + 2(n_u − 1)·h² + "
                 "L·(2h·(r_l + h_p) + h + n_u² + n_u³))")
    if shared:
        notes.append(f"{shared} of the {layers} layers reuse earlier layers' K and V (num_kv_shared_layers): no "
                     "k_proj, v_proj, k_norm, v_norm there — their parameters, K/V matmuls and norms' activations are "
                     "not billed, and the fused kernel keeps nothing of the reused K, V (HF's eager path keeps its "
                     "repeat_kv copies, a K and a V of a heads, when g < a); over the whole model exact, "
                     "a layer's terms the layers' average (pp > 1: the stage holding them is not itemised apart)")
    if sparse:
        notes.append(f"{sparse} of the {layers} layers cut the MLP's gate at a Gaussian top-k "
                     "(activation_sparsity_pattern): about 1 − sparsity of its activations stay nonzero, but the "
                     "matmuls are dense (no FLOP saved); those layers keep the std and the relu output, "
                     "2·s·b·(f + 1) bytes more each: over the whole model exact, a layer's terms the layers' average")
    cap = fields.value("final_logit_softcapping")
    if cap is not None:
        _number(fields, "final_logit_softcapping", cap)
        notes.append(f"final_logit_softcapping {cap:g}: tanh(logits/cap)·cap keeps the bf16 tanh output, 2·s·b·V "
                     f"bytes ({2 * fields.vocab:,} B per token) on the output side (reported beside the total, not "
                     "in it); no matmul")
    return Read(recipe, ffn=ffn, kv_heads=kv_heads, seq=fields.count("max_position_embeddings"),
                head_dim=head_dim, dims=dims, notes=tuple(notes))
