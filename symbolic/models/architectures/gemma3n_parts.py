"""Gemma 3n's parts (issue 40): its RMSNorm, AltUp, LAuReL, the per-layer inputs and the sparse MLP's
Gaussian top-k (transformers 5.24.0 models/gemma3n/modeling_gemma3n.py, cited by line as ``:LINE``).
Re-exported by :mod:`.parts`, so a recipe reads them as ``parts.NAME``."""
from __future__ import annotations

from dataclasses import replace

from sympy import Expr, Integer

from ...core.dims import L, b, h, s
from ...core.tensors import Axis, Group, Matmul, Parameter, SavedTensor

from .parts import HF, Part, _linear, _split, _tokens, _weight


# --- Gemma 3n (issue 40) ---------------------------------------------------------------
# transformers 5.24.0 models/gemma3n/modeling_gemma3n.py, cited by line below as ``:LINE``.

GEMMA3N = f"{HF} models/gemma3n/modeling_gemma3n.py"


def _share_shape(shape: tuple, share: Expr) -> tuple:
    return tuple(shape) if share == 1 else (share, *shape)


def gemma3n_norm(prefix: str, width: Expr = h, rows: Expr = Integer(1), with_scale: bool = True,
                 share: Expr = Integer(1), heads: bool = False) -> Part:
    """Gemma3nRMSNorm (:118-136): ``x.float()``, ``pow(2).mean(-1) + eps``, ``x · pow(mean_square, −0.5)``,
    ``· weight.float()`` (``with_scale``), cast back. Kept (traced): the fp32 input (pow's and the multiply's),
    the fp32 mean square per row (``pow(·, −0.5)`` keeps its input), the fp32 rstd per row, and with a scale
    the fp32 normalised x (the weight's multiply) and the weight's fp32 copy (per call, not per token).
    ``rows``: rows per token (heads of a per-head norm, split over tensor parallelism with ``heads``);
    ``share``: the share of the layers that have the norm."""
    split = Axis.TENSOR if heads else Axis.SEQUENCE

    def tokens(name, last, note):
        shape = _share_shape((s, b, last), share)
        return SavedTensor(name, shape, "fp32", split, len(shape) - 1 if heads else len(shape) - 3, Group.BODY,
                           GEMMA3N, note)

    saved = [tokens(f"{prefix}_input_fp32", rows * width, "x.float(): kept by pow and by x·rstd"),
             tokens(f"{prefix}_mean_square", rows, "mean(x²) + eps per row, fp32: kept by pow(·, −0.5)"),
             tokens(f"{prefix}_rstd", rows, "pow(mean(x²) + eps, −0.5) per row, fp32: kept by x·rstd")]
    params = ()
    if with_scale:
        saved += [tokens(f"{prefix}_normalized", rows * width, "x·rstd, fp32: kept for the weight's gradient"),
                  SavedTensor(f"{prefix}_weight_fp32", _share_shape((width,), share), "fp32", Axis.NONE, None,
                              Group.BODY, GEMMA3N, "weight.float(), kept by the multiply: per call, not per token")]
        params = (_weight(f"{prefix}_weight", (width,), GEMMA3N, share=share),)
    return Part(params, tuple(saved))


def altup(streams: Expr, correct_scale: bool = True) -> Part:
    """Gemma3nTextAltUp (:976-1073) around a layer: ``predict`` (:1003-1029) and ``correct`` (:1031-1060) of
    the ``streams`` (altup_num_inputs, n_u) hidden states. Each computes the router modalities (:998-1001:
    router_norm, × h⁻¹ (a buffer), modality_router h → n_u, tanh in fp32, cast back). predict: prediction_coefs
    n_u → n_u² on the modalities, then per token the (h × n_u)·(n_u × n_u) matmul of the streams by the
    coefficients, plus the streams. correct (training: the coefficients clamped to ±altup_coef_clip,
    :1047-1049): correction_coefs n_u → n_u on the modalities (+1), the innovation (activated − the active
    prediction) repeated n_u times, multiplied by each stream's coefficient, plus the predictions. With
    ``correct_scale`` the active stream's corrected copy (a ``clone``) × correct_output_scale (:1062-1071).
    Parameters: correct_output_scale h, correction_coefs n_u², prediction_coefs n_u³, modality_router h·n_u,
    router_norm h. Kept (traced): the streams (the layer's input, kept by the prediction matmul), per call of
    the router its norm's terms, its input and the fp32 tanh output; predict's bf16 modalities and
    coefficients; correct's bf16 modalities, the clamped n_u×n_u weight, the repeated innovation and the
    coefficients; the scaled stream's clone."""
    n = streams
    params = (_weight("altup/correct_output_scale", (h,), GEMMA3N),
              _weight("altup/correction_coefs_weight", (n, n), GEMMA3N),
              _weight("altup/prediction_coefs_weight", (n, n * n), GEMMA3N),
              _weight("altup/modality_router_weight", (h, n), GEMMA3N))
    router_norm = gemma3n_norm("altup/router_norm", h)
    params += router_norm.params
    saved = [SavedTensor("altup/streams", (s, b, n * h), "bf16", Axis.SEQUENCE, 0, Group.LAYER_INPUT, GEMMA3N,
                         "the layer's input, n_u hidden states, kept by the prediction matmul (:1025)")]
    for step in ("predict", "correct"):
        saved += [replace(t, name=t.name.replace("router_norm", f"{step}/router_norm")) for t in router_norm.saved]
        saved += [_tokens(f"altup/{step}/router_input", h, note="router_norm(x)·h⁻¹, modality_router's input",
                          source=GEMMA3N),
                  _tokens(f"altup/{step}/modalities_fp32", n, "fp32", note="tanh(routed.float()), kept by its "
                          "backward", source=GEMMA3N),
                  _tokens(f"altup/{step}/modalities", n, note="the modalities cast back, kept by the coefficients' "
                          "linear", source=GEMMA3N)]
    saved += [_tokens("altup/predict/coefficients", n * n, note="the prediction coefficients (n_u × n_u per token), "
                      "kept by the prediction matmul", source=GEMMA3N),
              SavedTensor("altup/correct/coefs_clamped", (n, n), "bf16", Axis.NONE, None, Group.BODY, GEMMA3N,
                          "correction_coefs.weight clamped to ±altup_coef_clip (training), kept by F.linear: per "
                          "layer, not per token"),
              _tokens("altup/correct/innovation", n * h, note="activated − the active prediction, repeated n_u "
                      "times, kept by the multiply by the coefficients", source=GEMMA3N),
              _tokens("altup/correct/coefficients", n, note="correction coefficients + 1, one per stream and token, "
                      "kept by the multiply", source=GEMMA3N)]
    if correct_scale:
        saved.append(_tokens("altup/corrected_active", h, note="the active stream's corrected copy (clone), kept by "
                             "× correct_output_scale", source=GEMMA3N))
    tokens = b * s
    mms = (Matmul("layer/altup/predict/modality_router", 1, tokens, h, n, True, "layer", GEMMA3N),
           Matmul("layer/altup/correct/modality_router", 1, tokens, h, n, True, "layer", GEMMA3N),
           Matmul("layer/altup/prediction_coefs", 1, tokens, n, n * n, True, "layer", GEMMA3N),
           Matmul("layer/altup/predict", tokens, h, n, n, False, "layer", GEMMA3N,
                  "each token's streams (h × n_u) × its coefficients (n_u × n_u)"),
           Matmul("layer/altup/correction_coefs", 1, tokens, n, n, True, "layer", GEMMA3N))
    return Part(params, tuple(saved), mms)


def laurel(rank: Expr) -> Part:
    """Gemma3nTextLaurelBlock (:920-935), the learned augmented residual: x + norm(right(left(x))), left
    h → r_l, right r_l → h, post_laurel_norm. Its input (the normalised active prediction) is also the
    attention's Q, K, V input (declared there). Kept: right's input (r_l) and the norm's terms."""
    params = (_weight("laurel/left_weight", (h, rank), GEMMA3N), _weight("laurel/right_weight", (rank, h), GEMMA3N))
    norm_part = gemma3n_norm("laurel/norm", h)
    saved = (_tokens("laurel/right_input", rank, note="linear_left's output, linear_right's input",
                     source=GEMMA3N),)
    mms = (_linear("laurel/left", h, rank, GEMMA3N), _linear("laurel/right", rank, h, GEMMA3N))
    return Part(params + norm_part.params, saved + norm_part.saved, mms)


def per_layer_input(width: Expr, activation: str = "gelu_pytorch_tanh") -> Part:
    """The layer's per-layer input (:1310-1320): the active corrected stream (scaled) through
    per_layer_input_gate h → h_p, the activation, × the layer's slice of the per-layer inputs,
    per_layer_projection h_p → h, post_per_layer_input_norm, added to the other streams. Kept: the gate's
    input, the activation's input (the gate's output), the activation's output (the multiply's), the
    product (the projection's input) and the norm's terms. The slice multiplied is a view of the per-layer
    inputs, a model-level tensor (:func:`per_layer_input_slice`)."""
    params = (_weight("per_layer_input/gate_weight", (h, width), GEMMA3N),
              _weight("per_layer_input/projection_weight", (width, h), GEMMA3N))
    norm_part = gemma3n_norm("per_layer_input/norm", h)
    saved = (_tokens("per_layer_input/gate_input", h, note="the scaled active stream, per_layer_input_gate's input",
                     source=GEMMA3N),
             _tokens("per_layer_input/act_input", width, note=f"the gate's output, kept by {activation}",
                     source=GEMMA3N),
             _tokens("per_layer_input/act_output", width, note=f"{activation}(gate), kept by × the per-layer input",
                     source=GEMMA3N),
             _tokens("per_layer_input/projection_input", width, note="act(gate) × the per-layer input, "
                     "per_layer_projection's input", source=GEMMA3N))
    mms = (_linear("per_layer_input/gate", h, width, GEMMA3N), _linear("per_layer_input/projection", width, h,
                                                                       GEMMA3N))
    return Part(params + norm_part.params, saved + norm_part.saved, mms)


def per_layer_input_slice(width: Expr) -> Part:
    """Each layer's slice of the model-level per-layer inputs (Gemma3nTextModel.get_per_layer_inputs and
    project_per_layer_inputs, :1738-1772): per_layer_model_projection h → L·h_p of the embeddings,
    per_layer_projection_norm over each layer's h_p, added to the per-layer embedding's lookup and scaled.
    Those tensors are (s, b, L, h_p): they grow by one slice per layer, so each layer is billed its slice —
    the projection's h → h_p matmul, the norm's fp32 input, mean square, rstd and normalised x, and the
    per-layer input itself (the layers' multiply keeps the whole (s, b, L·h_p) storage once). HF computes
    them before the first layer (on the first pipeline stage); full recompute keeps them (``LAYER_INPUT``)."""
    def tokens(name, last, dtype, note):
        return SavedTensor(name, (s, b, last), dtype, Axis.SEQUENCE, 0, Group.LAYER_INPUT, GEMMA3N, note)

    saved = (tokens("per_layer_input/slice", width, "bf16", "this layer's slice of the per-layer inputs, kept by "
                    "the layers' multiply (one (s, b, L·h_p) storage)"),
             tokens("per_layer_input/projection_norm_input_fp32", width, "fp32", "this layer's slice of "
                    "per_layer_projection_norm's fp32 input"),
             tokens("per_layer_input/projection_norm_mean_square", 1, "fp32", "its mean square, fp32"),
             tokens("per_layer_input/projection_norm_rstd", 1, "fp32", "its rstd, fp32"),
             tokens("per_layer_input/projection_norm_normalized", width, "fp32", "x·rstd, fp32, kept for the "
                    "weight's gradient"))
    return Part((), saved, (_linear("per_layer_input/model_projection", h, width, GEMMA3N,
                                    "this layer's h_p columns of per_layer_model_projection (model-level)"),))


def gaussian_topk(width: Expr, share: Expr = Integer(1)) -> Part:
    """Gemma3nTextMLP._gaussian_topk (:959-973) on the gate's output of a layer whose
    ``activation_sparsity_pattern`` entry is > 0: cutoff = mean + std · Φ⁻¹(sparsity) per token,
    relu(gate − cutoff), then the activation. Kept beyond the dense MLP (traced): the std's output per
    token (bf16; ``std`` also keeps its input, the gate's output, which the dense MLP's activation keeps),
    the relu's output (also the activation's input) and the bf16 multiplier Φ⁻¹(sparsity) (one element,
    per layer). No matmul. ``share``: the sparse layers' share L_sp/L."""
    return Part(saved=(
        _tokens("mlp/sparsity_std", 1, note="std of the gate's output per token (unbiased = False), kept by its "
                "backward and by × Φ⁻¹(sparsity)", source=GEMMA3N, share=share),
        _split("mlp/sparsity_relu_output", width, note="relu(gate − cutoff): kept by relu and by the activation",
               source=GEMMA3N, share=share),
        SavedTensor("mlp/sparsity_multiplier", _share_shape((Integer(1),), share), "bf16", Axis.NONE, None,
                    Group.BODY, GEMMA3N, "Φ⁻¹(sparsity) cast to bf16, kept by the std's multiply: per layer")))


def gemma3n_model_side(streams: Expr, width: Expr, vocab: Expr) -> Part:
    """Gemma3nTextModel's model-level parameters beside the word embedding and final norm (:1589-1612):
    the per-layer embedding (vocab_size_per_layer_input × L·h_p), per_layer_model_projection (h × L·h_p)
    and per_layer_projection_norm (h_p), all before the first layer; altup_projections ((n_u − 1) h × h,
    before the layers) and altup_unembed_projections ((n_u − 1) h × h, after them). Their matmuls: the two
    AltUp projections (the per-layer projection's h × h_p per layer is billed with the layer)."""
    params = (Parameter("embedding/per_layer", (vocab, L * width), "embedding", GEMMA3N,
                        "embed_tokens_per_layer: h_p columns per layer"),
              Parameter("embedding/per_layer_projection", (h, L * width), "embedding", GEMMA3N,
                        "per_layer_model_projection: h_p columns per layer"),
              Parameter("embedding/per_layer_projection_norm", (width,), "embedding", GEMMA3N),
              Parameter("embedding/altup_projections", (streams - 1, h, h), "embedding", GEMMA3N,
                        "one h × h projection per extra AltUp stream"),
              Parameter("output/altup_unembed_projections", (streams - 1, h, h), "output", GEMMA3N,
                        "one h × h projection per extra AltUp stream"))
    mms = (Matmul("embedding/altup_projections", streams - 1, b * s, h, h, True, "embedding", GEMMA3N),
           Matmul("output/altup_unembed_projections", streams - 1, b * s, h, h, True, "output", GEMMA3N))
    return Part(params, (), mms)
