"""The parts a decoder layer is composed of: each returns its terms with their sources.

A part is a function returning a :class:`Part` — the parameters (one layer's
worth, ``scope="layer"``, or model-level), the tensors it saves for backward
and its matmuls — so a family is a recipe of parts
(:mod:`symbolic.models.architectures.composed`; the papers' GPT and LLaMA
layers are recipes as well, their terms named in the papers' words by a
:class:`Wording`) and the ledgers sum the shapes. Saved tensors are as
HuggingFace transformers 5.24.0 keeps them in bf16 (the tests trace the real
decoder layers); parameters as its modules hold them (the tests count
``model.parameters()`` on the meta device).

``share``: a factor on a part that only some layers have (the MoE of a model
whose first L_d layers are dense: (L − L_d)/L; the dense MLP: L_d/L). The
ledgers repeat every layer term L times, so the totals are exact; per layer
the terms are the layers' average (the pipeline stage holding the dense
layers differs from it: a stated approximation).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from sympy import Expr, Integer

from ...core.dims import E, L, V, a, b, f_e, g, h, k, s
from ...core.tensors import Axis, Group, Matmul, Parameter, SavedTensor
from .conventions import BACKEND, Conventions

HF = "HF transformers 5.24.0"
HF_NORM = f"{HF} *RMSNorm (eager)"
FUSED_NORM = "fused RMSNorm kernel"
FLASH = "Dao 2023 §3.1 (FlashAttention-2); torch SDPA"
MLA_SOURCE = "DeepSeek-AI 2024, DeepSeek-V2 §2.1 (MLA); HF DeepseekV3Attention"
MOE_SOURCE = "Fedus et al. 2021 §2.1; DeepSeekMoE (Dai et al. 2024 §3); HF *SparseMoeBlock / *MoE"


@dataclass(frozen=True)
class Part:
    """One part's terms: parameters, saved tensors, matmuls."""

    params: tuple = ()
    saved: tuple = ()
    matmuls: tuple = ()

    def __add__(self, other: "Part") -> "Part":
        return Part(self.params + other.params, self.saved + other.saved, self.matmuls + other.matmuls)


NOTHING = Part()


def shared_by(part: Part, share: Expr) -> Part:
    """``part`` on a share of the layers only (Granite-4.0-H's attention on (L − L_s)/L of them): each
    term gets the share as a leading factor of its shape (a matmul, of its batch), as the parts with a
    ``share`` argument build theirs."""
    if share == 1:
        return part

    def scaled(t):
        split_dim = getattr(t, "split_dim", None)
        extra = {} if split_dim is None else {"split_dim": split_dim + 1}
        return replace(t, shape=(share, *t.shape), **extra)

    return Part(tuple(scaled(p) for p in part.params), tuple(scaled(t) for t in part.saved),
                tuple(replace(mm, batch=mm.batch * share) for mm in part.matmuls))


def total(parts) -> Part:
    out = NOTHING
    for part in parts:
        out = out + part
    return out


#: The sources a part gives by default (HF's modules); a :class:`Wording` replaces them by the
#: inventory's own citation. A specific source (FlashAttention, a backend convention, HF's activation
#: chains, MLA, the MoE block, a fused norm kernel) stays: it says where that one term comes from.
GENERIC_SOURCES = (HF, HF_NORM)


@dataclass(frozen=True)
class Wording:
    """How an inventory names and cites the terms its parts return.

    The parts name their terms as HF's modules do and cite HF; a paper's
    inventory (Korthikanti's GPT layer, the LLaMA layer) is the same terms in
    the paper's words. params, saved, matmuls: the citation of each kind of
    term whose source is a generic one (:data:`GENERIC_SOURCES`; None keeps
    it). names: a part's term name -> the inventory's (full names, e.g.
    ``layer/attention/output_weight``). notes and sources: by the inventory's
    name, a term's note and source. per_head: saved per-head tensors keep
    the heads as their own axis, (s, b, a, d) rather than (s, b, a·d) — the
    same elements, the shape the papers write.
    """

    params: str | None = None
    saved: str | None = None
    matmuls: str | None = None
    names: tuple = ()
    notes: tuple = ()
    sources: tuple = ()
    per_head: bool = False

    @classmethod
    def of(cls, params=None, saved=None, matmuls=None, names=None, notes=None, sources=None,
           per_head=False) -> "Wording":
        """A wording from dictionaries (stored as sorted pairs: the wording is hashable)."""
        pairs = lambda d: tuple(sorted((d or {}).items()))  # noqa: E731
        return cls(params, saved, matmuls, pairs(names), pairs(notes), pairs(sources), per_head)


HF_WORDING = Wording()  #: the parts' own names and HF's citations


def cite(part: Part, wording: Wording) -> Part:
    """``part``'s terms as ``wording`` names and cites them (see :class:`Wording`); only names,
    notes and sources change, never a shape, dtype, split or group."""
    if wording == HF_WORDING:
        return part
    names, notes, sources = dict(wording.names), dict(wording.notes), dict(wording.sources)

    def term(t, source):
        name = names.get(t.name, t.name)
        cited = source if source is not None and t.source in GENERIC_SOURCES else t.source
        return replace(t, name=name, note=notes.get(name, t.note), source=sources.get(name, cited))

    return Part(tuple(term(t, wording.params) for t in part.params),
                tuple(term(t, wording.saved) for t in part.saved),
                tuple(term(t, wording.matmuls) for t in part.matmuls))


# --- shapes ---------------------------------------------------------------------

def _tokens(name, last, dtype="bf16", group=Group.BODY, note="", source=HF, share: Expr = Integer(1)):
    """An (s, b, last) tensor; sequence parallelism splits s (a hidden-width activation)."""
    shape = (s, b, last) if share == 1 else (share, s, b, last)
    return SavedTensor(name, shape, dtype, Axis.SEQUENCE, 0 if share == 1 else 1, group, source, note)


def _split(name, last, dtype="bf16", note="", source=HF, share: Expr = Integer(1)):
    """An (s, b, last) tensor whose last axis tensor parallelism splits (heads, FFN width)."""
    shape = (s, b, last) if share == 1 else (share, s, b, last)
    return SavedTensor(name, shape, dtype, Axis.TENSOR, len(shape) - 1, Group.BODY, source, note)


def _rows(name, dtype, note, source=HF, per=Integer(1)):
    """One value per token (× ``per``, e.g. per head)."""
    shape = (s, b) if per == 1 else (s, b, per)
    return SavedTensor(name, shape, dtype, Axis.SEQUENCE, 0, Group.BODY, source, note)


def _weight(name, shape, source=HF, note="", share: Expr = Integer(1)):
    """A layer's parameter (named ``layer/...`` as the other inventories name them)."""
    shape = tuple(shape) if share == 1 else (share, *shape)
    return Parameter(f"layer/{name}", shape, "layer", source, note)


def _linear_params(name, d_in, d_out, bias: bool, source=HF, note="", share: Expr = Integer(1)) -> list:
    """A linear layer's parameters: its (d_in, d_out) weight and, with ``bias``, its d_out bias
    (``layer/NAME_weight``, ``layer/NAME_bias``)."""
    weight = _weight(f"{name}_weight", (d_in, d_out), source, note, share)
    return [weight, _weight(f"{name}_bias", (d_out,), source, share=share)] if bias else [weight]


def _linear(name, m, n, source=HF, note="", batch: Expr = Integer(1), tokens: Expr | None = None,
            group=Group.BODY):
    """A layer's weight matmul over its tokens (``layer/...``)."""
    return Matmul(f"layer/{name}", batch, b * s if tokens is None else tokens, m, n, True, "layer", source, note,
                  group)


# --- norms ----------------------------------------------------------------------

def norm(prefix: str, kind: str, width: Expr = h, conv: Conventions | None = None, layer_input: bool = False,
         rows: Expr = Integer(1), source: str = HF_NORM) -> Part:
    """One normalisation over ``width`` features (``rows`` of them per token, e.g. per head).

    ``rmsnorm`` (HF Llama/Qwen/OLMo/DeepSeek RMSNorm): keeps its fp32 input
    copy (pow and x·rstd), the fp32 rstd per row, and x·rstd cast back to
    the activation dtype (for the weight's gradient); weight: width.
    ``rmsnorm_fp32`` (HF OLMo-2 RMSNorm): x·rstd stays fp32 (kept) and is
    multiplied by the weight before the cast back. ``rmsnorm_offset`` (HF
    Gemma RMSNorm): the same with (1 + weight), a new fp32 tensor of the
    norm's width that the multiply keeps too.
    ``rmsnorm_fused`` (a fused RMSNorm kernel, Apex/Transformer Engine):
    keeps its input and the fp32 rstd per row; weight: width.
    ``layernorm``: keeps its input and the per-row mean and rstd (dtype by
    the backend conventions, source :data:`~.conventions.BACKEND`: the
    papers leave them out, :func:`~.conventions.paper_form` drops them);
    weight and bias: width each. The norm's output is kept by its consumer,
    which declares it.
    """
    group = Group.LAYER_INPUT if layer_input else Group.BODY
    last = width * rows
    per = rows
    if kind == "layernorm_1p":  # HF NemotronLayerNorm1P: F.layer_norm(x, weight + 1, bias)
        part = norm(prefix, "layernorm", width, conv, layer_input, rows, source)
        scale = SavedTensor(f"{prefix}_scale", (width,), "bf16", Axis.NONE, None, Group.BODY, source,
                            "weight + 1, a new tensor F.layer_norm keeps: per layer, not per token")
        return Part(tuple(replace(p, note="(1 + weight) scaling") if p.name.endswith("_weight") else p
                          for p in part.params), part.saved + (scale,))
    if kind == "layernorm_fp32":  # HF CohereLayerNorm: in fp32, weight only (no bias), cast back
        saved = (
            _tokens(f"{prefix}_centered", last, "fp32", group, "x − mean in fp32, kept by pow(2)", source),
            _rows(f"{prefix}_rstd", "fp32", "rsqrt(var + eps) per row, fp32", source, per),
            _tokens(f"{prefix}_centered_again", last, "fp32", Group.BODY,
                    "x − mean computed a second time, kept by the multiply by rstd", source),
            _tokens(f"{prefix}_normalized", last, "fp32", Group.BODY,
                    "(x − mean)·rstd in fp32, kept for the weight's gradient", source),
            SavedTensor(f"{prefix}_weight_fp32", (width,), "fp32", Axis.NONE, None, Group.BODY, source,
                        "weight.to(float32), kept by the multiply: per layer, not per token"),
        )
        return Part((_weight(f"{prefix}_weight", (width,), source, "no bias"),), saved)
    if kind == "layernorm":
        stats_dtype = conv.norm_statistics if conv is not None else "fp32"
        saved = (_tokens(f"{prefix}_input", last, "bf16", group, "the norm's input", source),
                 *(SavedTensor(f"{prefix}_{n}", (s, b) if per == 1 else (s, b, per), stats_dtype, Axis.SEQUENCE, 0,
                               Group.BODY, BACKEND, f"per-row {n} kept by the LayerNorm kernel")
                   for n in ("mean", "rstd")))
        params = (_weight(f"{prefix}_weight", (width,), source), _weight(f"{prefix}_bias", (width,), source))
        return Part(params, saved)
    if kind == "rmsnorm_fp32_weight":  # NemotronHRMSNorm: weight.to(fp32) × x·rstd in fp32, then cast back
        part = norm(prefix, "rmsnorm_fp32", width, conv, layer_input, rows, source)
        return Part(part.params, part.saved + (SavedTensor(
            f"{prefix}_weight_fp32", (width,), "fp32", Axis.NONE, None, Group.BODY, source,
            "weight.to(float32), kept by the multiply: per layer, not per token"),))
    if kind == "rmsnorm_fused":
        saved = (_tokens(f"{prefix}_input", last, "bf16", group, "the norm's input", FUSED_NORM),
                 _rows(f"{prefix}_rstd", "fp32", "1/rms per row, fp32", FUSED_NORM, per))
        return Part((_weight(f"{prefix}_weight", (width,), source),), saved)
    if kind not in ("rmsnorm", "rmsnorm_fp32", "rmsnorm_offset"):
        raise ValueError(f"norm must be layernorm, rmsnorm, rmsnorm_fused, rmsnorm_fp32 or rmsnorm_offset, "
                         f"not {kind!r}")
    normalized = "bf16" if kind == "rmsnorm" else "fp32"
    saved = (
        _tokens(f"{prefix}_input_fp32", last, "fp32", group, "input upcast to fp32: kept by pow and by x·rstd", source),
        _rows(f"{prefix}_rstd", "fp32", "rsqrt(mean(x²)+eps) per row, fp32", source, per),
        _tokens(f"{prefix}_normalized", last, normalized, Group.BODY,
                "x·rstd" + (", fp32, kept for (1 + weight)'s gradient" if normalized == "fp32"
                            else " cast back, kept for the weight's gradient"), source),
    )
    if kind == "rmsnorm_offset":  # (1.0 + weight.float()) is a new fp32 tensor the multiply keeps
        saved += (SavedTensor(f"{prefix}_scale_fp32", (width,), "fp32", Axis.NONE, None, Group.BODY, source,
                              "1 + weight in fp32, kept by the multiply: per layer, not per token"),)
    return Part((_weight(f"{prefix}_weight", (width,), source,
                         "(1 + weight) scaling" if kind == "rmsnorm_offset" else ""),), saved)


# --- attention --------------------------------------------------------------------

def attention_projections(width: Expr, kv_heads: Expr = g, qkv_bias: bool = False, o_bias: bool = False,
                          fused: bool = False, input_name: str = "attention/qkv_input",
                          layer_input: bool = False) -> Part:
    """Q (h→a·w), K and V (h→g·w each), O (a·w→h), optional biases; the shared input they keep.

    ``fused``: one Q|K|V matrix (GPT-NeoX, Phi-3, Megatron's GPT) — the same
    count, one matmul of width a·w + 2g·w.
    """
    q, kv = a * width, kv_heads * width
    names = (("query", q), ("key", kv), ("value", kv))
    params = []
    if fused:
        params += _linear_params("attention/qkv", h, q + 2 * kv, qkv_bias, note="fused Q|K|V")
    else:
        for name, n in names:
            params += _linear_params(f"attention/{name}", h, n, qkv_bias)
    params += _linear_params("attention/output", q, h, o_bias)
    matmuls = ((_linear("attention/qkv", h, q + 2 * kv, note="fused Q|K|V"),) if fused else
               tuple(_linear(f"attention/{name}", h, n) for name, n in names))
    saved = (_tokens(input_name, h, group=Group.LAYER_INPUT if layer_input else Group.BODY,
                     note="shared input of the Q, K, V projections"),)
    return Part(tuple(params), saved, matmuls)


def attention_output(width: Expr, o_bias: bool = False) -> Part:
    """The output projection's matmul (its weight is in :func:`attention_projections`)."""
    return Part(matmuls=(_linear("attention/output", a * width, h),))


def qk_norm(kind: str, width: Expr, kv_heads: Expr = g, norm_kind: str = "rmsnorm",
            conv: Conventions | None = None) -> Part:
    """RMSNorm on the queries and keys before RoPE: over each head (``head``:
    Qwen3, Gemma-3; weight d_h each) or over all of them (``full``: OLMo-2;
    weights a·d_h and g·d_h). A LayerNorm over each head (its per-row mean and
    rstd per head, dtype by ``conv``): ``head_layernorm`` one LayerNorm of
    width d_h shared by the heads, weight and bias (Phi's ``qk_layernorm``:
    transformers 5.24.0 models/phi/modeling_phi.py, ``q_layernorm``/``k_layernorm``);
    ``head_layernorm_each`` one LayerNorm per head without bias, a·d_h and
    g·d_h weights (StableLmLayerNormPerHead, models/stablelm/modeling_stablelm.py:
    ``torch.split`` into views of one storage, each normed, then ``torch.cat``);
    ``head_layernorm_fp32_each`` Cohere's ``use_qk_norm`` (Command R+): one CohereLayerNorm of
    shape (heads, d_h) — over each head's d_h, in fp32, a weight per head and feature, no bias —
    a·d_h and g·d_h weights (models/cohere/modeling_cohere.py:231-236, applied at :254-256)."""
    if kind == "none":
        return NOTHING
    if kind in ("head", "head_layernorm", "head_layernorm_each", "head_layernorm_fp32_each"):
        return _heads_split(qk_norm(f"_{kind}", width, kv_heads, norm_kind, conv))
    if kind == "_head_layernorm_fp32_each":
        out = NOTHING
        for prefix, heads in (("attention/query_norm", a), ("attention/key_norm", kv_heads)):
            part = norm(prefix, "layernorm_fp32", width, rows=heads, source=HF)
            saved = tuple(replace(t, shape=(heads * width,)) if t.name == f"{prefix}_weight_fp32" else t
                          for t in part.saved)
            out = out + Part((_weight(f"{prefix}_weight", (heads * width,), HF,
                                      "CohereLayerNorm of shape (heads, d_h): a weight per head, no bias"),), saved)
        return out
    if kind in ("_head_layernorm", "_head_layernorm_each"):
        kind = kind[1:]
        out = NOTHING
        for prefix, heads in (("attention/query_norm", a), ("attention/key_norm", kv_heads)):
            part = norm(prefix, "layernorm", width, conv, rows=heads, source=HF)
            if kind == "head_layernorm_each":
                part = Part((_weight(f"{prefix}_weight", (heads * width,), HF,
                                     "one LayerNorm per head, no bias"),), part.saved)
            out = out + part
        return out
    if kind == "l2":  # Llama4TextL2Norm: x.float()·rsqrt(mean(x²) + eps), cast back; no weight
        return l2_qk_norm(width, kv_heads)
    if kind == "_head":
        return (norm("attention/query_norm", norm_kind, width, rows=a)
                + norm("attention/key_norm", norm_kind, width, rows=kv_heads))
    if kind == "full":
        return (norm("attention/query_norm", norm_kind, a * width)
                + norm("attention/key_norm", norm_kind, kv_heads * width))
    raise ValueError(f"qk_norm must be none, head, full, l2, head_layernorm, head_layernorm_each or "
                     f"head_layernorm_fp32_each, not {kind!r}")


def _heads_split(part: Part) -> Part:
    """A per-head norm's per-token tensors on the tensor-parallel axis: it runs on each head's own
    width after the column-parallel Q and K projections, so a TP rank normalises its a/t (g/t) heads —
    the last entry of each (s, b, heads·width) or (s, b, heads) tensor is split t ways, and the
    sequence stays whole under SP (the projections' output is full-sequence). Measured on one rank
    of ``ColwiseParallel`` Q/K with Qwen3's per-head RMSNorm (:mod:`symbolic.per_rank`)."""
    def split(x: SavedTensor) -> SavedTensor:
        if x.split is not Axis.SEQUENCE:
            return x
        return replace(x, split=Axis.TENSOR, split_dim=len(x.shape) - 1)
    return Part(part.params, tuple(split(x) for x in part.saved), part.matmuls)


def l2_qk_norm(width: Expr, kv_heads: Expr = g, share: Expr = Integer(1)) -> Part:
    """Llama 4's qk-norm (transformers 5.24.0 models/llama4/modeling_llama4.py, ``Llama4TextL2Norm``
    on Q and K after RoPE, on the RoPE layers only): an RMSNorm over each head's width without a
    weight — per head its fp32 input (kept by pow and by x·rstd) and the fp32 rstd; the cast back
    is Q (K), which the attention core keeps. ``share``: the RoPE layers' share (L − L_n)/L."""
    saved = []
    for prefix, heads in (("attention/query_norm", a), ("attention/key_norm", kv_heads)):
        saved += [_split(f"{prefix}_input_fp32", heads * width, "fp32", "x.float(): kept by pow and by x·rstd "
                         "(L2 norm, no weight)", share=share),
                  _split(f"{prefix}_rstd", heads, "fp32", "rsqrt(mean(x²)+eps) per head and token, fp32",
                         share=share)]
    return Part((), tuple(saved))


def temperature_scales(share: Expr = Integer(1)) -> Part:
    """Llama 4's attention temperature tuning on its NoPE layers (transformers 5.24.0
    models/llama4/modeling_llama4.py, ``attn_temperature_tuning``): Q × attn_scales, an fp32 scale
    per position (1, s, 1, 1) expanded over the batch, which the multiply keeps — s values, shared
    by the batch. ``share``: the NoPE layers' share L_n/L."""
    shape = (s,) if share == 1 else (share, s)
    return Part(saved=(SavedTensor("attention/temperature_scales", shape, "fp32", Axis.SEQUENCE, len(shape) - 1,
                                   Group.BODY, HF, "log1p(floor((pos + 1)/floor_scale))·attn_scale + 1 per "
                                   "position, fp32, kept by Q's multiply: shared by the batch"),))


def rope_share(nope_layers: bool) -> tuple[Expr, Expr]:
    """(share of the RoPE layers, share of the NoPE layers) — (1, 0) when every layer has RoPE."""
    from ...core.dims import L_n
    if not nope_layers:
        return Integer(1), Integer(0)
    return (L - L_n) / L, L_n / L


def attention_core(width: Expr, kv_heads: Expr = g, kernel: str = "fused", value_width: Expr | None = None,
                   output_copy: bool = False, softcap: bool = False, value_storage: Expr | None = None,
                   mask_dtype: str = "mask", per_head: bool = False, dropout: bool = False,
                   window_share: Expr = Integer(0)) -> Part:
    """Q·Kᵀ, softmax, ·V over ``a`` query heads of width ``width`` (V of ``value_width``).

    ``paper`` (Korthikanti et al. 2022 §4.1, Megatron's GPT layer): Q and K
    kept for Q·Kᵀ, the softmax computed and kept in the activation dtype,
    dropout on the probabilities (its mask, ``mask_dtype``, and its output,
    kept for ·V), V and the context. The paper's 5as²b bytes per layer are
    its three s×s terms, 2 + 1 + 2 bytes per element (the paper's layer is
    multi-head: K and V at ``kv_heads`` = a).

    ``fused`` (SDPA/FlashAttention, native GQA): keeps Q, K, V (K, V at g
    heads), the output and an fp32 log-sum-exp per row and head; with
    ``output_copy`` (Q laid out per head by a ``torch.cat``: GPT-NeoX, Phi-3)
    the output comes back per head and ``transpose(1, 2).contiguous()``
    copies it for the output projection, which keeps the copy;
    ``value_storage``: V is a slice of a wider output the kernel keeps whole
    (MLA: V is split from kv_b's a·(d_n + d_v) output).
    ``explicit`` (HF eager): K and V repeated to a heads (repeat_kv), the
    softmax in fp32 and the probabilities cast back; ``softcap`` (Gemma-2):
    tanh(scores / cap)·cap keeps the tanh output. ``math`` (torch SDPA's
    math fallback, taken on CPU when V's width differs from Q's — MLA): Q
    scaled, Kᵀ, the probabilities and V, all upcast to fp32, no output.
    The matmuls count the full s×s products (as FlopCounterMode does);
    ``window_share``: the share of the layers (L_w/L) whose kernel multiplies
    only within a sliding window (:func:`window_products`), the rest full.

    ``dropout`` (``attention_dropout`` > 0 in training, Seed-OSS): ``explicit`` keeps the dropout's
    mask (``mask_dtype``: CPU's ``input * noise`` keeps a bf16 noise tensor, CUDA a bool mask) and the
    dropped probabilities (the ·V matmul's input) instead of the bf16 probabilities; ``math`` (torch
    SDPA with dropout_p > 0 on CPU, aten ``_scaled_dot_product_attention_math``) keeps the fp32 noise
    and the dropped fp32 probabilities besides the fp32 softmax; ``fused`` (FlashAttention-2 on CUDA)
    draws the mask in the kernel from its Philox RNG state and keeps no s×s tensor (the seed and
    offset it keeps are two int64 values, not counted).

    Condition of ``explicit``: b ≥ 2. At b = 1 torch's batched matmul
    reshapes a slice as a view, so a slice of a fused projection keeps its
    whole storage (MLA's V: kv_b's output), and MQA's repeat_kv stays a
    view (K, V at one head) — traced, stated where the bill runs it.
    """
    value_width = width if value_width is None else value_width

    def heads(name, n, w, note, src=HF):
        """n heads of width w per token; ``per_head``: the heads an axis of their own, (s, b, n, w)."""
        if per_head:
            return SavedTensor(name, (s, b, n, w), "bf16", Axis.TENSOR, 2, Group.BODY, src, note)
        return _split(name, n * w, note=note, source=src)
    full = 1 - window_share
    matmuls = (
        Matmul("layer/attention/scores", b * a * full, s, width, s, False, "layer", HF, "Q·Kᵀ per head",
               Group.ATTENTION_CORE),
        Matmul("layer/attention/context", b * a * full, s, s, value_width, False, "layer", HF,
               "probabilities·V per head", Group.ATTENTION_CORE),
    ) + (window_products(width, value_width, window_share) if window_share != 0 else ())
    scores = lambda name, dtype, note: SavedTensor(name, (b, a, s, s), dtype, Axis.TENSOR, 1,  # noqa: E731
                                                   Group.ATTENTION_CORE, HF, note)
    if kernel == "fused":
        saved = (
            heads("attention/query", a, width, "Q after RoPE, kept by the kernel", FLASH),
            heads("attention/key", kv_heads, width, "K after RoPE, g heads (native GQA)", FLASH),
            heads("attention/value", kv_heads, value_width, "V, g heads (native GQA)", FLASH)
            if value_storage is None else
            _split("attention/value", value_storage, note="V, a slice of a wider output: its whole storage is kept",
                   source=FLASH),
            SavedTensor("attention/logsumexp", (b, a, s), "fp32", Axis.TENSOR, 1, Group.BODY, FLASH,
                        "log-sum-exp of each score row, fp32: the softmax is recomputed from it in backward"),
            heads("attention/projection_input", a, value_width,
                  "the kernel's output" + ("" if output_copy else ", also the output projection's input"), FLASH),
        )
        if output_copy:
            saved += (heads("attention/output_copy", a, value_width,
                            "the output made contiguous token-major, the output projection's input"),)
        return Part((), saved, matmuls)
    if kernel == "math":
        saved = (
            SavedTensor("attention/query", (s, b, a * width), "fp32", Axis.TENSOR, 2, Group.BODY, HF,
                        "Q scaled, upcast to fp32 (SDPA math path)"),
            SavedTensor("attention/key", (s, b, a * width), "fp32", Axis.TENSOR, 2, Group.BODY, HF,
                        "Kᵀ, upcast to fp32 (SDPA math path)"),
            scores("attention/probabilities", "fp32", "softmax(Q·Kᵀ), fp32"),
            *((scores("attention/dropout_mask", "fp32", "dropout's noise, fp32 (CPU: input * noise)"),
               scores("attention/dropped_probabilities", "fp32", "the dropped probabilities, fp32, kept for ·V"))
              if dropout else ()),
            SavedTensor("attention/value", (s, b, a * value_width), "fp32", Axis.TENSOR, 2, Group.BODY, HF,
                        "V, upcast to fp32 (SDPA math path)"),
            heads("attention/projection_input", a, value_width, "the output, cast back, the output projection's input"),
        )
        return Part((), saved, matmuls)
    if kernel == "paper":
        saved = (
            heads("attention/query", a, width, "Q, kept for the Q·Kᵀ backward"),
            heads("attention/key", kv_heads, width, "K, kept for the Q·Kᵀ backward"),
            scores("attention/softmax_output", "bf16", "softmax(Q·Kᵀ), kept for the softmax backward"),
            scores("attention/softmax_dropout_mask", mask_dtype, "dropout mask on the attention probabilities"),
            scores("attention/softmax_dropout_output", "bf16", "dropped-out probabilities, kept for the ·V backward"),
            heads("attention/value", kv_heads, value_width, "V, kept for the ·V backward"),
            heads("attention/projection_input", a, value_width, "attention context, the output projection's input"),
        )
        return Part((), saved, matmuls)
    if kernel != "explicit":
        raise ValueError(f"attention kernel must be fused, explicit, math or paper, not {kernel!r}")
    saved = (
        heads("attention/query", a, width, "Q after RoPE, kept for Q·Kᵀ"),
        heads("attention/key", a, width, "K after RoPE, repeated to a heads (repeat_kv), kept for Q·Kᵀ"),
        *((scores("attention/softcap_tanh", "bf16", "tanh(scores / cap), kept for its backward"),) if softcap else ()),
        scores("attention/softmax_output", "fp32", "softmax computed and kept in fp32"),
        *((scores("attention/dropout_mask", mask_dtype, "dropout mask on the probabilities"),
           scores("attention/dropped_probabilities", "bf16", "the dropped probabilities, kept for ·V"))
          if dropout else
          (scores("attention/probabilities", "bf16", "softmax cast back to the activation dtype, kept for ·V"),)),
        heads("attention/value", a, value_width, "V repeated to a heads (repeat_kv), kept for ·V"),
        heads("attention/projection_input", a, value_width, "attention context, the output projection's input"),
    )
    return Part((), saved, matmuls)


def attention_sinks(core: Part, kernel: str, heads: Expr = a) -> Part:
    """gpt-oss's attention sinks on an attention core (transformers 5.24.0
    models/gpt_oss/modeling_gpt_oss.py:285, ``sinks``, a learned logit per query head; parameters: a).

    ``explicit`` (``eager_attention_forward``, :227-255): the sink is concatenated to each score row
    (``torch.cat``, nothing kept), the row's max subtracted (``max(dim=-1)`` keeps its int64 index, one per
    row and head), the softmax over s + 1 taken in the activation dtype (its output kept, (b, a, s, s + 1))
    and the sink column dropped by a slice: ·V reads a view of that storage, so no fp32 copy and no second
    s×s tensor is kept. Other kernels: the fused core as it is (the sink enters the log-sum-exp)."""
    params = (_weight("attention/sinks", (heads,), HF, "a learned logit per query head (the sink)"),)
    if kernel != "explicit":
        return Part(params, core.saved, core.matmuls)
    saved = []
    for term in core.saved:
        if term.name == "attention/softmax_output":
            saved += [SavedTensor("attention/softmax_output", (b, heads, s, s + 1), "bf16", Axis.TENSOR, 1,
                                  Group.ATTENTION_CORE, HF, "softmax over the scores and the sink, in the activation "
                                  "dtype; ·V reads its first s columns (a view)"),
                      SavedTensor("attention/row_max_index", (b, heads, s), "int64", Axis.TENSOR, 1,
                                  Group.ATTENTION_CORE, HF, "index of each row's max (scores and sink), kept by "
                                  "max(dim=-1) for its backward")]
        elif term.name != "attention/probabilities":
            saved.append(term)
    return Part(params, tuple(saved), core.matmuls)


#: flash-attn's native sliding window (Dao-AILab/flash-attention @0251105a, flash_attn/flash_attn_interface.py:862-869
#: FlashAttnFunc: ``window_size`` passed to the kernel, ``ctx.save_for_backward(q, k, v, out_padded, softmax_lse,
#: rng_state)`` as without a window; csrc/flash_attn/src/flash_fwd_kernel.h:90: the key blocks left of the window
#: are skipped), as HF passes it (modeling_flash_attention_utils.py:687-692: window_size (w − 1, w − 1) with causal)
FLASH_WINDOW = ("FlashAttention-2 with a native window (flash-attn @0251105a FlashAttnFunc window_size; HF "
                "modeling_flash_attention_utils.py:687)")


def window_band(seq: Expr = s, window: Expr | None = None) -> Expr:
    """The score entries one (sequence, head) is billed under a causal sliding window of ``window`` keys,
    in the engine's convention for the causal triangle.

    The engine bills causal attention at the full s×s square (FlopCounterMode's count of HF's masked
    products, Megatron-Core's and PaLM's MFU convention; :data:`symbolic.ledgers.kernels.CAUSAL_DENSE_OVER_EXECUTED`
    = 2 relates it to the triangle a causal kernel executes): the executed triangle s(s+1)/2 mirrored
    over its diagonal, 2·executed − s. The same rule on a window: a query at position i executes
    min(i + 1, w) keys (flash-attn's hopper/benchmark_attn.py ``flops`` counts these), s·m − m(m − 1)/2
    in all with m = min(w, s) (flash-attn @0251105a hopper/benchmark_attn.py:62-73); mirrored, the band of keys
    within w on either side,

        s·(2m − 1) − m·(m − 1),

    which is s² at m = s (no window cut: full attention's count), so the windowed and the full layers'
    FLOPs stand in the same ratio to what their kernels execute (≈ 2), and an MFU read from the bill
    stays as comparable as for full attention — never the full s² for a kernel that skips the blocks
    outside the window (torchtitan's FLOP counter did, and reported MFU above 100 % on windowed models).
    Tiles: a kernel computes whole blocks that cross the window's edge; like the causal triangle, the
    count is the mask's, not the tiles'.

    >>> from sympy import Integer
    >>> window_band(Integer(5), Integer(3)), window_band(Integer(5), Integer(8))
    (19, 25)
    """
    from sympy import Max

    from ...core.dims import w
    window = w if window is None else window
    m = window + seq - Max(window, seq)  # min(w, s), written with Max: the formula readers take Max only
    return seq * (2 * m - 1) - m * (m - 1)


def window_products(width: Expr, value_width: Expr, share: Expr) -> tuple:
    """Q·Kᵀ and ·V of the windowed layers (``share`` of them, L_w/L) on a kernel with a native window:
    per (sequence, head) :func:`window_band` entries, s queries of band/s keys on average each."""
    keys = window_band() / s
    return (Matmul("layer/attention/scores_window", b * a * share, s, width, keys, False, "layer", FLASH_WINDOW,
                   "Q·Kᵀ per head within the sliding window (the band, window_band)", Group.ATTENTION_CORE),
            Matmul("layer/attention/context_window", b * a * share, s, keys, value_width, False, "layer",
                   FLASH_WINDOW, "probabilities·V per head within the sliding window", Group.ATTENTION_CORE))


def mla_projections(r_q: Expr, r_kv: Expr, d_n: Expr, d_r: Expr, d_v: Expr, q_lora: bool,
                    bias: bool = False) -> Part:
    """DeepSeek's multi-head latent attention: the projections and their norms.

    Queries: h→r_q (RMSNorm r_q)→a·(d_n+d_r), or h→a·(d_n+d_r) without
    ``q_lora``. Keys and values: h→r_kv+d_r (the latent and the shared
    rotary key), RMSNorm r_kv, r_kv→a·(d_n+d_v). Output a·d_v→h.
    ``bias`` (attention_bias): on q_a, kv_a and the output projection.
    """
    head_qk = d_n + d_r
    params, mms = [], []
    if q_lora:
        params += [_weight("attention/q_a_weight", (h, r_q), MLA_SOURCE)]
        if bias:
            params.append(_weight("attention/q_a_bias", (r_q,), MLA_SOURCE))
        params += [*norm("attention/q_a_norm", "rmsnorm", r_q).params,
                   _weight("attention/q_b_weight", (r_q, a * head_qk), MLA_SOURCE)]
        mms += [_linear("attention/q_a", h, r_q, MLA_SOURCE), _linear("attention/q_b", r_q, a * head_qk, MLA_SOURCE)]
    else:
        params.append(_weight("attention/query_weight", (h, a * head_qk), MLA_SOURCE))
        mms.append(_linear("attention/query", h, a * head_qk, MLA_SOURCE))
    params.append(_weight("attention/kv_a_weight", (h, r_kv + d_r), MLA_SOURCE, "latent r_kv and rotary key d_r"))
    if bias:
        params.append(_weight("attention/kv_a_bias", (r_kv + d_r,), MLA_SOURCE))
    params += [*norm("attention/kv_a_norm", "rmsnorm", r_kv).params,
               _weight("attention/kv_b_weight", (r_kv, a * (d_n + d_v)), MLA_SOURCE),
               _weight("attention/output_weight", (a * d_v, h), MLA_SOURCE)]
    if bias:
        params.append(_weight("attention/output_bias", (h,), MLA_SOURCE))
    mms += [_linear("attention/kv_a", h, r_kv + d_r, MLA_SOURCE), _linear("attention/kv_b", r_kv, a * (d_n + d_v),
                                                                          MLA_SOURCE)]
    saved = (_tokens("attention/qkv_input", h, note="shared input of q_a (or q) and kv_a"),)
    return Part(tuple(params), saved, tuple(mms))


def mla_saved(r_q: Expr, r_kv: Expr, d_n: Expr, d_r: Expr, d_v: Expr, q_lora: bool) -> Part:
    """What HF's ``DeepseekV3Attention`` keeps between its projections (eager RMSNorms, RoPE on the
    d_r slice, Q and K concatenated from their no-RoPE and RoPE parts)."""
    terms = []
    if q_lora:
        terms += [*norm("attention/q_a_norm", "rmsnorm", r_q).saved,
                  _tokens("attention/q_b_input", r_q, note="q_a_norm output × weight, q_b's input")]
    terms += [*norm("attention/kv_a_norm", "rmsnorm", r_kv).saved,
              _tokens("attention/kv_b_input", r_kv, note="kv_a_norm output × weight, kv_b's input")]
    return Part((), tuple(terms))


# --- residual wiring ----------------------------------------------------------------

def block_dropout(name: str, block: str, mask_dtype: str = "mask", source: str = HF) -> Part:
    """Dropout on a block's output before the residual add (Megatron's GPT, Korthikanti §4.1:
    ``x + dropout(block(x))``): its mask, one element per hidden feature and token. ``mask_dtype``:
    the backend's (1-byte ``mask`` on CUDA; see :mod:`.conventions`)."""
    return Part(saved=(_tokens(name, h, mask_dtype, note=f"dropout mask on the {block} block's output",
                               source=source),))


# --- MLPs -------------------------------------------------------------------------

#: What HF's element-wise tanh-approximation GeLUs keep beyond their input, per element of the
#: MLP width (transformers ``activations.py``): NewGELU 0.5·x·(1 + tanh(√(2/π)(x + 0.044715·x³)))
#: keeps tanh's output, 0.5·x and 1 + tanh (the last product's operands); FastGELU
#: 0.5·x·(1 + tanh(0.79788·x·(1 + 0.044715·x·x))) also keeps 0.044715·x, 0.79788·x and 1 + 0.044715·x².
CHAINS = {
    "gelu_new": ("tanh_output", "half_input", "one_plus_tanh"),
    "gelu_fast": ("scaled_input", "cubic_factor", "inner_scaled", "tanh_output", "half_input", "one_plus_tanh"),
}


def activation_chain(activation: str, width: Expr, prefix: str = "mlp", share: Expr = Integer(1),
                     source: str = "HF transformers 5.24.0 activations.py") -> tuple:
    """The intermediates an element-wise activation chain keeps, (s, b, width) each in the activation dtype."""
    return tuple(_split(f"{prefix}/{activation}/{name}", width, note=f"{activation}: {name.replace('_', ' ')}",
                        source=source, share=share) for name in CHAINS.get(activation, ()))


XIELU_SOURCE = "HF transformers 5.24.0 activations.py XIELUActivation._xielu_python (Huang 2024, xIELU)"


def xielu_part(width: Expr, prefix: str = "mlp", share: Expr = Integer(1)) -> Part:
    """xIELU as HF's Python path runs it (transformers 5.24.0 activations.py:281-288, the path taken
    unless the ``xielu`` CUDA wheel is installed): ``where(x > 0, α_p·x·x + β·x, (expm1(min(x, ε)) − x)·α_n
    + β·x)`` with α_p = softplus(alpha_p), α_n = β + softplus(alpha_n) from two learned scalars per layer
    (``alpha_p``, ``alpha_n``: models/apertus/modeling_apertus.py:52-53 builds one per MLP) and β, ε buffers (not
    parameters). Per element of the MLP width, besides its input x (``act_input``, kept by α_p·x, by
    ·x and by min) and its output (fc2's input): α_p·x (kept by ·x), expm1's output (kept by its
    backward), expm1(…) − x (kept by ·α_n), and the bool ``x > 0`` (kept by ``where``); per layer, the
    two (1,) scalars α_p and α_n (kept by their multiplies). β·x and min keep only β and ε, buffers."""
    def element(name, dtype, note):
        return _split(f"{prefix}/xielu/{name}", width, dtype, note=f"xIELU: {note}", source=XIELU_SOURCE,
                      share=share)

    saved = (element("alpha_p_x", "bf16", "α_p·x, kept by the second multiply by x"),
             element("expm1_output", "bf16", "expm1(min(x, ε)), kept by expm1's backward"),
             element("negative_branch", "bf16", "expm1(min(x, ε)) − x, kept by the multiply by α_n"),
             element("positive_mask", "mask", "x > 0 (bool), kept by torch.where"),
             *(SavedTensor(f"{prefix}/xielu/{name}", (Integer(1),) if share == 1 else (share, Integer(1)), "bf16",
                           Axis.NONE, None, Group.BODY, XIELU_SOURCE,
                           f"{formula}: one value per layer, kept by the multiply it scales")
               for name, formula in (("alpha_p", "softplus(alpha_p)"), ("alpha_n", "β + softplus(alpha_n)"))))
    params = tuple(_weight(f"{prefix}/xielu_{name}", (Integer(1),), XIELU_SOURCE, "a learned scalar of xIELU",
                           share=share) for name in ("alpha_p", "alpha_n"))
    return Part(params, saved)


def mlp(kind: str, width: Expr, activation: str = "silu", bias: bool = False, fused_gate_up: bool = False,
        prefix: str = "mlp", input_name: str | None = None, share: Expr = Integer(1),
        layer_input: bool = False) -> Part:
    """A dense MLP of inner width ``width``.

    ``gated`` (SwiGLU with silu, GeGLU with a GeLU): down(act(gate(x))·up(x)):
    keeps the gate output (the activation's input), the activation's output,
    the up output and their product (the down projection's input); with
    ``fused_gate_up`` (Phi-3) gate and up are halves of one output storage —
    the same bytes. ``plain`` (GPT-NeoX): fc2(act(fc1(x))) keeps the first
    output and the activation's output. Element-wise activations (silu, gelu,
    gelu_pytorch_tanh) keep only their input. The input the first linears
    share is kept once.
    """
    if activation not in ("silu", "gelu", "gelu_pytorch_tanh", "gelu_new", "gelu_fast", "relu", "relu2", "xielu"):
        raise ValueError(f"activation {activation!r} is not one the MLP part models")
    if activation == "xielu" and kind != "plain":
        raise ValueError("xielu is modelled in the plain MLP (Apertus's up → xIELU → down)")
    params, saved, mms = [], [], []
    note = "shared input of the MLP's first linears"
    saved.append(_tokens(input_name or f"{prefix}/input", h, group=Group.LAYER_INPUT if layer_input else Group.BODY,
                         note=note, share=share))
    if kind == "gated":
        if fused_gate_up:
            params += _linear_params(f"{prefix}/gate_up", h, 2 * width, bias, note="fused gate|up", share=share)
        else:
            for name in ("gate", "up"):
                params += _linear_params(f"{prefix}/{name}", h, width, bias, share=share)
        params += _linear_params(f"{prefix}/down", width, h, bias, share=share)
        saved += [_split(f"{prefix}/gate_output", width, note=f"gate output, {activation}'s input", share=share),
                  *activation_chain(activation, width, prefix, share),
                  _split(f"{prefix}/act_output", width, note=f"{activation} output, kept for ·up", share=share),
                  _split(f"{prefix}/up_output", width, note="up output, kept for act·", share=share),
                  _split(f"{prefix}/down_input", width, note="act(gate)·up, the down projection's input",
                         share=share)]
        mms += [_linear(f"{prefix}/gate", h, width, batch=share), _linear(f"{prefix}/up", h, width, batch=share),
                _linear(f"{prefix}/down", width, h, batch=share)]
    elif kind == "plain":
        params += _linear_params(f"{prefix}/fc1", h, width, bias, share=share)
        params += _linear_params(f"{prefix}/fc2", width, h, bias, share=share)
        # relu2 (HF ReLUSquaredActivation, Nemotron): relu keeps its output, square reads the same storage
        saved += [_split(f"{prefix}/act_input", width, share=share,
                         note="relu(fc1 output), kept by relu and by square" if activation == "relu2"
                         else f"fc1 output, {activation}'s input"),
                  *activation_chain(activation, width, prefix, share),
                  _split(f"{prefix}/fc2_input", width, note=f"{activation} output, fc2's input", share=share)]
        mms += [_linear(f"{prefix}/fc1", h, width, batch=share), _linear(f"{prefix}/fc2", width, h, batch=share)]
        if activation == "xielu":
            xielu = xielu_part(width, prefix, share)
            params += xielu.params
            saved += xielu.saved
    else:
        raise ValueError(f"mlp must be gated or plain, not {kind!r}")
    return Part(tuple(params), tuple(saved), tuple(mms))


# --- mixture of experts -------------------------------------------------------------

@dataclass(frozen=True)
class Router:
    """How a family routes, as far as parameters and saved tensors care.

    score: ``softmax`` (fp32 probabilities) or ``sigmoid`` (DeepSeek-V3,
    fp32 logits). renormalize: the k weights are divided by their sum.
    weight_dtype: the dtype of the weight each expert output is multiplied
    by. logits_fp32: the router runs in fp32 (DeepSeek: its weight is fp32
    and its input upcast, so the upcast input is kept). topk_first: top-k of the
    logits first, then the softmax over those k (GraniteMoe): the kept scores are k
    per token, not E. sparsemixer: Phi-3.5-MoE's router (transformers 5.24.0
    models/phimoe/modeling_phimoe.py ``sparsemixer``, training mode): two rounds, each a
    bool threshold mask kept by ``masked_fill``, a Gumbel-sampled expert (int64, kept by
    ``gather``, ``scatter`` and ``PhimoeMultiplier``), a softmax over E in the activation dtype
    (kept by its backward and by ``PhimoeMultiplier``) and the gathered multiplier (kept by
    ``PhimoeMultiplier``); k is 2 by construction. input_jitter: ``input_jitter_noise`` > 0:
    the block and the router each multiply the router's input in place by a uniform noise
    tensor, which the multiply keeps. dense_experts: Llama 4's (transformers 5.24.0
    models/llama4/modeling_llama4.py, ``Llama4Router`` and ``Llama4TextMoe``): top-k of the
    logits, the others set to −inf, a sigmoid in fp32 cast back; every token goes through every
    expert, its input scaled by its score (0 for an expert not chosen): :func:`dense_experts`.
    correction_bias: the router's ``e_score_correction_bias``, added to the scores to choose the
    experts only (DeepSeek-V3, GLM-4.5, dots.llm1, MiniMax-M2, ERNIE-4.5's ``moe_statics``):
    ``""`` none, ``buffer`` (an fp32 buffer, not a parameter) or ``parameter`` (ERNIE-4.5: an
    fp32 ``nn.Parameter`` of E, ``requires_grad=False``, which HF's parameter count includes). The
    biased scores, and a grouped top-k's group scores and ``masked_fill`` (``n_group``,
    ``topk_group``), feed only the top-k's indices, which carry no gradient: nothing of them
    is kept for backward (traced: DeepSeek-V3, GLM-4.5, dots.llm1 at n_group 2 and 4).
    """

    name: str
    score: str = "softmax"
    renormalize: bool = True
    weight_dtype: str = "fp32"
    logits_fp32: bool = False
    extra: tuple = field(default=())
    topk_first: bool = False
    sparsemixer: bool = False
    input_jitter: bool = False
    dense_experts: bool = False
    #: the router's linear has a bias of E (gpt-oss's GptOssTopKRouter)
    bias: bool = False
    #: the dtype of the kept scores (gpt-oss: the softmax over the k in the activation dtype)
    score_dtype: str = "fp32"
    #: the routed experts' kind: ``swiglu`` (HF's eager loop, :func:`routed_experts`) or ``clamped_swiglu``
    #: (gpt-oss's biased experts and clamped SwiGLU, :func:`clamped_swiglu_experts`)
    experts: str = "swiglu"
    correction_bias: str = ""


def moe(router: Router, expert_ffn: Expr = f_e, shared_width: Expr | None = None, shared_gate: bool = False,
        share: Expr = Integer(1), tokens_per_expert: Expr | None = None, activation: str = "silu",
        shared_bias: bool = False) -> Part:
    """Routed experts (E of width f_e, top-k), optional shared expert(s) of total width f_s
    (optionally behind a sigmoid gate h→1), as HF's eager experts loop keeps them.

    Parameters: router E×h; stacked gate|up E×2f_e×h and down E×h×f_e.
    Tokens per expert: balanced routing s·b·k/E unless given.
    """
    return moe_layer(router, expert_ffn, E, k, shared_width, shared_gate, share, tokens_per_expert, activation,
                     shared_bias=shared_bias)


def dense_share(dense_layers: bool) -> tuple[Expr, Expr]:
    """(share of the MoE layers, share of the dense layers) — (1, 0) when every layer is MoE."""
    from ...core.dims import L_d
    if not dense_layers:
        return Integer(1), Integer(0)
    return (L - L_d) / L, L_d / L


# --- embeddings and output ----------------------------------------------------------

def embeddings(tied: bool, final_norm: str, positions: Expr | None = None, source: str = HF,
               logits_bias: bool = False) -> Part:
    """Word embedding V×h (also the output layer when ``tied``), learned positions
    (``positions`` rows) if any, the final norm, an untied output layer h×V and, with
    ``logits_bias``, its bias of V (Phi-2: kept when the weight is tied)."""
    params = [Parameter("embedding/word", (V, h), "embedding", source, "tied: also the output layer" if tied else "")]
    if positions is not None:
        params.append(Parameter("embedding/position", (positions, h), "embedding", source,
                                f"learned positions, one row per position up to {positions}"))
    params.append(Parameter("output/final_norm_weight", (h,), "output", source, "final norm"))
    if final_norm in ("layernorm", "layernorm_1p"):
        params.append(Parameter("output/final_norm_bias", (h,), "output", source, "final LayerNorm"))
    if not tied:
        params.append(Parameter("output/projection_weight", (h, V), "output", source, "untied output layer"))
    if logits_bias:
        params.append(Parameter("output/projection_bias", (V,), "output", source, "the output layer's bias"))
    mms = (Matmul("output/logits", 1, b * s, h, V, True, "output", source, "hidden states × output weight"),)
    return Part(tuple(params), (), mms)


# --- mixture of experts, one part per component ---------------------------------------
# The router, the routed experts and the shared experts as separate parts, so the hand-named MoE
# layer (:mod:`.moe`, Mixtral/Qwen2-MoE with E_s shared experts of width f_e) and the composed
# families (:func:`moe`) are one code path: each is a sum of these.

def balanced_tokens(experts: Expr = E, top_k: Expr = k) -> Expr:
    """Tokens per expert under balanced routing: the s·b·k assignments shared by the E experts."""
    return s * b * top_k / experts


def moe_router(router: Router, experts: Expr = E, top_k: Expr = k, share: Expr = Integer(1),
               source: str = HF, paper: str = MOE_SOURCE) -> Part:
    """The router: its weight (h → E, fp32 in DeepSeek), its matmul over every token, and what
    its scoring and top-k keep per token (input, scores, the k indices, the renormalised k
    weights and their sum when ``router.renormalize``, the router's ``extra`` terms)."""
    params = (_weight("moe/router_weight", (h, experts), paper,
                      "fp32 (DeepSeek keeps it in fp32)" if router.logits_fp32 else "", share=share),)
    if router.bias:
        params += (_weight("moe/router_bias", (experts,), paper, "the router's bias", share=share),)
    if router.correction_bias == "parameter":  # ERNIE-4.5's moe_statics: a parameter HF counts, not trained
        params += (_weight("moe/router_correction_bias", (experts,), source, "e_score_correction_bias: an fp32 "
                           "nn.Parameter with requires_grad=False (chooses the experts only)", share=share),)
    mms = (Matmul("layer/moe/router", share, b * s, h, experts, True, "layer", paper),)
    saved = [_tokens("moe/router_input", h, note="the router's and the experts' gathers' input", source=source,
                     share=share)]
    if router.sparsemixer:
        saved += sparsemixer_saved(experts, top_k, router.input_jitter, share, source)
        return Part(params, tuple(saved), mms)
    if router.logits_fp32:
        saved.append(_tokens("moe/router_input_fp32", h, "fp32", note="router input upcast to fp32", source=source,
                             share=share))
    saved.append(_tokens("moe/router_scores", top_k if router.topk_first else experts, router.score_dtype,
                         note=(f"{router.score} of the k chosen logits, {router.score_dtype}" if router.topk_first
                               else f"{router.score} of the router logits, {router.score_dtype}"),
                         source=source, share=share))
    saved.append(_tokens("moe/topk_indices", top_k, "int64", note="the k chosen experts", source=source, share=share))
    if router.renormalize:
        saved += [_tokens("moe/routing_weights", top_k, "fp32", note="the k weights, renormalised", source=source,
                          share=share),
                  _tokens("moe/routing_weight_sum", 1, "fp32", note="their sum (the divisor)", source=source,
                          share=share)]
    saved += [replace(term, shape=(share, *term.shape), split_dim=term.split_dim + 1) if share != 1 else term
              for term in router.extra]
    return Part(params, tuple(saved), mms)


def sparsemixer_saved(experts: Expr = E, top_k: Expr = k, input_jitter: bool = False, share: Expr = Integer(1),
                      source: str = HF) -> tuple:
    """What Phi-3.5-MoE's sparsemixer keeps per token in training mode (transformers 5.24.0
    models/phimoe/modeling_phimoe.py, ``sparsemixer`` and ``PhimoeMultiplier``), besides the
    router's input: per round (the first pick, then the second with the first masked out by
    ``scatter``) the threshold mask (bool, E), the softmax of the masked logits (activation
    dtype, E), the sampled expert (int64) and its gathered multiplier (activation dtype). The
    Gumbel noise, the ``max`` that picks the midpoint mask and the concatenated weights are
    not kept (nothing of the backward graph holds them). ``input_jitter``: the two in-place
    noise multiplies of the router's input keep their (s, b, h) noise tensors."""
    def tokens(name, last, dtype, note):
        return _tokens(name, last, dtype, note=note, source=source, share=share)

    saved = []
    if input_jitter:
        saved += [tokens("moe/input_jitter", h, "bf16", "input_jitter_noise: the block's uniform noise, kept by "
                         "the in-place multiply of the router's input"),
                  tokens("moe/router_input_jitter", h, "bf16", "input_jitter_noise: the router's own uniform noise, "
                         "kept by its second in-place multiply")]
    saved += [
        tokens("moe/sparsemixer_mask", experts, "mask", "first round's threshold mask, kept by masked_fill"),
        tokens("moe/router_scores", experts, "bf16", "softmax of the masked logits (first round), kept by its "
               "backward and by PhimoeMultiplier"),
        tokens("moe/sparsemixer_mask_second", experts, "mask", "second round's threshold mask, kept by masked_fill"),
        tokens("moe/router_scores_second", experts, "bf16", "softmax of the second round's masked logits, kept by "
               "its backward and by PhimoeMultiplier"),
        tokens("moe/topk_indices", top_k, "int64", "the two Gumbel-sampled experts (one per round), kept by "
               "gather, scatter and PhimoeMultiplier"),
        tokens("moe/sparsemixer_multipliers", top_k, "bf16", "each round's gathered softmax value, kept by "
               "PhimoeMultiplier"),
    ]
    return tuple(saved)


def dense_experts(expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k, share: Expr = Integer(1),
                  source: str = HF, paper: str = MOE_SOURCE) -> Part:
    """Llama 4's routed experts (transformers 5.24.0 models/llama4/modeling_llama4.py,
    ``Llama4Router``, ``Llama4TextMoe``, ``Llama4TextExperts``): the router h → E, top-k of the
    logits scattered into a −inf row, ``sigmoid(scores.float()).to(bf16)``; the input repeated E
    times and multiplied by the score column, so every token goes through every expert (the
    experts not chosen with a zero input); ``bmm`` by stacked E×h×2f_e and E×f_e×h weights.
    Kept per token: the router's input (also the shared expert's), the k int64 indices (the
    scatter's), the fp32 sigmoid output, the bf16 score column (the multiply's), and per expert
    and token the repeated input, the scaled input (the bmm's), the gate|up output, the
    activation's output and the gated product (the down bmm's input)."""
    params = (_weight("moe/router_weight", (h, experts), paper, share=share),
              _weight("moe/experts_gate_up_weight", (experts * h, 2 * expert_ffn), paper, "all E experts (N_total)",
                      share=share),
              _weight("moe/experts_down_weight", (experts * expert_ffn, h), paper, "all E experts (N_total)",
                      share=share))
    mms = (Matmul("layer/moe/router", share, b * s, h, experts, True, "layer", paper),
           Matmul("layer/moe/experts_gate_up", experts * share, b * s, h, 2 * expert_ffn, True, "layer", paper,
                  "every token through every expert"),
           Matmul("layer/moe/experts_down", experts * share, b * s, expert_ffn, h, True, "layer", paper,
                  "every token through every expert"))

    def tokens(name, last, dtype, note):
        return _tokens(name, last, dtype, note=note, source=source, share=share)

    def expert(name, last, note):
        return SavedTensor(name, (experts, s * b * share, last), "bf16", Axis.EXPERT, 0, Group.BODY, source, note)

    saved = (
        tokens("moe/router_input", h, "bf16", "the router's, the repeat's and the shared expert's input"),
        tokens("moe/topk_indices", top_k, "int64", "the k chosen experts, kept by the scatter"),
        tokens("moe/router_scores", experts, "fp32", "sigmoid of the scattered logits, fp32, kept by its backward"),
        tokens("moe/router_score_column", experts, "bf16", "the scores cast back and laid out per expert, kept "
               "by the input's multiply"),
        expert("moe/expert/repeated_input", h, "the input repeated for every expert, kept by the multiply"),
        expert("moe/expert/input", h, "the scaled input, kept by the gate|up bmm"),
        SavedTensor("moe/expert/gate_up_output", (experts, s * b * share, 2 * expert_ffn), "bf16", Axis.EXPERT, 0,
                    Group.BODY, source, "gate|up output: the activation's input and the up half"),
        SavedTensor("moe/expert/act_output", (experts, s * b * share, expert_ffn), "bf16", Axis.EXPERT, 0,
                    Group.EXPERT_ACTIVATION, source, "act(gate), kept for up·"),
        SavedTensor("moe/expert/down_input", (experts, s * b * share, expert_ffn), "bf16", Axis.EXPERT, 0,
                    Group.EXPERT_ACTIVATION_OUTPUT, source, "up·act(gate), the down bmm's input"),
    )
    return Part(params, saved, mms)


def routed_experts(router: Router, expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k,
                   tokens_per_expert: Expr | None = None, share: Expr = Integer(1), activation: str = "silu",
                   source: str = MOE_SOURCE, paper: str = MOE_SOURCE) -> Part:
    """E routed experts of width f_e as HF's eager experts loop runs them (a gather of each
    expert's tokens, fused gate|up, the activation, down, the routing weight's multiply, the
    index_add_ back): stacked weights E×h×2f_e and E×f_e×h, each expert's matmuls over its
    tokens (balanced routing s·b·k/E unless ``tokens_per_expert``), and the per-expert saved
    tensors on the ``EXPERT`` axis (shape: experts, tokens per expert, width) that
    ``layout.strategies.expert_dispatch`` splits."""
    per_expert = balanced_tokens(experts, top_k) if tokens_per_expert is None else tokens_per_expert
    tokens = per_expert * share  # saved tensors: the layers' average
    note = "all E experts (N_total)"
    params = (
        _weight("moe/experts_gate_up_weight", (experts * h, 2 * expert_ffn), paper, note, share=share),
        _weight("moe/experts_down_weight", (experts * expert_ffn, h), paper, note, share=share),
    )
    mms = (
        Matmul("layer/moe/experts_gate_up", experts * share, per_expert, h, 2 * expert_ffn, True, "layer", paper),
        Matmul("layer/moe/experts_down", experts * share, per_expert, expert_ffn, h, True, "layer", paper),
    )

    def expert(name, last, dtype="bf16", note="", group=Group.BODY):
        return SavedTensor(name, (experts, tokens, last), dtype, Axis.EXPERT, 0, group, source, note)

    act = activation
    saved = (
        expert("moe/expert/token_index", 2, "int64", "(slot, token) pairs of the expert's assignments: one "
               "torch.where storage, kept by the gathers"),
        expert("moe/expert/input", h, note="the expert's tokens, gathered"),
        expert("moe/expert/gate_up_output", 2 * expert_ffn, note=f"gate|up output: {act}'s input and the up half"),
        # the groups a fused expert SwiGLU and Megatron-Core's moe_act recompute drop (layout.strategies)
        expert("moe/expert/act_output", expert_ffn, note=f"{act}(gate), kept for ·up", group=Group.EXPERT_ACTIVATION),
        expert("moe/expert/down_input", expert_ffn, note=f"{act}(gate)·up", group=Group.EXPERT_ACTIVATION_OUTPUT),
        expert("moe/expert/routing_weight", 1, router.weight_dtype, "the token's weight for this expert"),
        expert("moe/expert/down_output", h, note="kept for the routing weight's gradient"),
        expert("moe/expert/combine_input", h, note="weighted output cast back, kept by index_add_"),
    )
    return Part(params, saved, mms)


def clamped_swiglu_experts(router: Router, expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k,
                           tokens_per_expert: Expr | None = None, share: Expr = Integer(1), activation: str = "silu",
                           source: str = MOE_SOURCE, paper: str = MOE_SOURCE) -> Part:
    """gpt-oss's routed experts as HF's eager loop runs them (transformers 5.24.0
    models/gpt_oss/modeling_gpt_oss.py:68-114, GptOssExperts): per hit expert its tokens gathered,
    ``x @ gate_up_proj[e] + gate_up_proj_bias[e]`` (gate and up interleaved in one h×2f_e weight),
    ``_apply_gate`` (:82-88) — gate = gate_up[..., ::2].clamp(max=limit), up = gate_up[..., 1::2].clamp(
    −limit, limit), glu = gate·sigmoid(alpha·gate), (up + 1)·glu — then ``@ down_proj[e] + down_proj_bias[e]``,
    the routing weight's multiply and ``index_add_``. Parameters: E×h×2f_e and E×2f_e, E×f_e×h and E×h.
    Kept per assignment (traced): the (slot, token) index pair, the gathered input, the gate|up output (both
    clamps keep it: strided views of one storage), the clamped gate (kept by the multiply by its sigmoid),
    the sigmoid's output, up + 1 and glu (kept by their product), that product (the down matmul's input),
    the routing weight, the down output (kept by the weight's multiply) and the weighted output (kept by
    ``index_add_``). Multiplying by alpha, adding 1 and the biases keep nothing; the matmuls are the
    swiglu experts' (biases are not matmul FLOPs). ``activation`` is unused: the activation is fixed."""
    per_expert = balanced_tokens(experts, top_k) if tokens_per_expert is None else tokens_per_expert
    tokens = per_expert * share  # saved tensors: the layers' average
    note = "all E experts (N_total)"
    params = (
        _weight("moe/experts_gate_up_weight", (experts * h, 2 * expert_ffn), paper, note + ", gate|up interleaved",
                share=share),
        _weight("moe/experts_gate_up_bias", (experts, 2 * expert_ffn), paper, note, share=share),
        _weight("moe/experts_down_weight", (experts * expert_ffn, h), paper, note, share=share),
        _weight("moe/experts_down_bias", (experts, h), paper, note, share=share),
    )
    mms = (
        Matmul("layer/moe/experts_gate_up", experts * share, per_expert, h, 2 * expert_ffn, True, "layer", paper),
        Matmul("layer/moe/experts_down", experts * share, per_expert, expert_ffn, h, True, "layer", paper),
    )

    def expert(name, last, dtype="bf16", note="", group=Group.BODY):
        return SavedTensor(name, (experts, tokens, last), dtype, Axis.EXPERT, 0, group, source, note)

    act = Group.EXPERT_ACTIVATION  # what a fused clamped-SwiGLU kernel would recompute from gate|up
    saved = (
        expert("moe/expert/token_index", 2, "int64", "(slot, token) pairs of the expert's assignments: one "
               "torch.where storage, kept by the gathers and index_add_"),
        expert("moe/expert/input", h, note="the expert's tokens, gathered"),
        expert("moe/expert/gate_up_output", 2 * expert_ffn, note="gate|up output plus bias, kept by both clamps "
               "(gate and up are strided views of it)"),
        expert("moe/expert/gate_clamped", expert_ffn, note="gate clamped above at swiglu_limit, kept by "
               "gate·sigmoid(alpha·gate)", group=act),
        expert("moe/expert/gate_sigmoid", expert_ffn, note="sigmoid(alpha·gate), kept by its backward and the "
               "multiply", group=act),
        expert("moe/expert/up_plus_one", expert_ffn, note="up clamped to ±swiglu_limit, plus 1, kept by (up + 1)·glu",
               group=act),
        expert("moe/expert/glu", expert_ffn, note="gate·sigmoid(alpha·gate), kept by (up + 1)·glu", group=act),
        expert("moe/expert/down_input", expert_ffn, note="(up + 1)·glu, the down matmul's input",
               group=Group.EXPERT_ACTIVATION_OUTPUT),
        expert("moe/expert/routing_weight", 1, router.weight_dtype, "the token's weight for this expert"),
        expert("moe/expert/down_output", h, note="down output plus bias, kept for the routing weight's gradient"),
        expert("moe/expert/combine_input", h, note="weighted output, kept by index_add_"),
    )
    return Part(params, saved, mms)


def shared_experts(width: Expr, activation: str = "silu", gate: bool = False, share: Expr = Integer(1),
                   source: str = MOE_SOURCE, bias: bool = False) -> Part:
    """The shared expert(s) every token goes through: one gated MLP of total width ``width``
    (DeepSeekMoE §3.2; HF builds one MLP of n_shared × f_e), reading the router's input (declared
    once, by :func:`moe_router`); with ``gate``, a sigmoid gate h → 1 scales its output
    (Qwen2-MoE), which keeps the sigmoid and the shared output for the multiply. ``bias``: biases on
    its three linears (ERNIE-4.5's ``use_bias``), which keep nothing more."""
    dense = mlp("gated", width, activation, bias, prefix="moe/shared", input_name="moe/shared/input", share=share)
    part = Part(dense.params, dense.saved[1:], dense.matmuls)
    if gate:
        part = part + Part(
            (_weight("moe/shared_gate_weight", (h,), source, "h -> 1", share=share),),
            (_tokens("moe/shared/gate_sigmoid", 1, note="sigmoid of the shared-expert gate", source=source,
                     share=share),
             _tokens("moe/shared/output", h, note="the shared experts' output, kept by the gating multiply",
                     source=source, share=share)),
            (Matmul("layer/moe/shared_gate", share, b * s, h, 1, True, "layer", source),))
    return part


def moe_layer(router: Router, expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k,
              shared_width: Expr | None = None, shared_gate: bool = False, share: Expr = Integer(1),
              tokens_per_expert: Expr | None = None, activation: str = "silu", source: str | None = None,
              paper: str = MOE_SOURCE, shared_bias: bool = False) -> Part:
    """The MoE block as a recipe: :func:`moe_router` + :func:`routed_experts` (+
    :func:`shared_experts` when ``shared_width`` is given). ``source``: the implementation the
    saved tensors are cited from (None: each part's own default); ``paper``: the source the
    router's and the routed experts' weights and matmuls cite."""
    cite = {} if source is None else {"source": source}
    if router.dense_experts:
        part = dense_experts(expert_ffn, experts, top_k, share, paper=paper, **cite)
        if shared_width is not None:
            part = part + shared_experts(shared_width, activation, shared_gate, share, bias=shared_bias, **cite)
        return part
    gate = moe_router(router, experts, top_k, share, paper=paper, **cite)
    if router.logits_fp32 and shared_width is None:
        # the router reads its fp32 upcast and the experts' gathers keep only indices: with no shared expert
        # nothing keeps the block's activation-dtype input (traced: ERNIE-4.5 with moe_num_shared_experts 0)
        gate = Part(gate.params, tuple(t for t in gate.saved if t.name != "moe/router_input"), gate.matmuls)
    routed = clamped_swiglu_experts if router.experts == "clamped_swiglu" else routed_experts
    part = gate + routed(router, expert_ffn, experts, top_k, tokens_per_expert, share, activation, paper=paper, **cite)
    if shared_width is not None:
        part = part + shared_experts(shared_width, activation, shared_gate, share, bias=shared_bias, **cite)
    return part


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
# --- state-space (Mamba2) mixers -----------------------------------------------------

#: Where the Mamba2 mixer's terms are read from: the torch reference path transformers runs when
#: mamba_ssm and causal_conv1d are absent (CPU), the same in falcon_h1 and granitemoehybrid.
MAMBA_SOURCE = (f"{HF} models/falcon_h1/modeling_falcon_h1.py:669-825 (FalconH1Mixer.forward, torch path), "
                ":473-586 (mamba2_chunk_scan), :310-327 (segment_sum); Dao & Gu 2024 §6 (SSD, Mamba-2)")

#: The gated norms of a Mamba2 mixer's output y (fp32 from the scan) with the gate z (a bf16 slice of
#: in_proj's output): ``silu`` y·silu(z), no norm (FalconH1 ``mamba_rms_norm`` false); ``norm_gate``
#: RMSNorm(y)·silu(z) (FalconH1RMSNormGated, norm_before_gate); ``gate_norm`` RMSNorm(y·silu(z))
#: (FalconH1RMSNormGated, not norm_before_gate; GraniteMoeHybridRMSNormGated, whose cast back to its input's
#: dtype is to y's, fp32), both in fp32 with the weight applied in fp32.
MAMBA_GATES = ("silu", "norm_gate", "gate_norm")


#: The CUDA kernel HF's Mamba2 mixers call in training when ``mamba_ssm`` and ``causal_conv1d`` are installed
#: and no cache is passed (``use_cache`` false, or gradient checkpointing, which turns it off).
MAMBA_KERNEL_SOURCE = ("mamba-ssm e9594ce mamba_ssm/ops/triton/ssd_combined.py:822-899 "
                       "(MambaSplitConv1dScanCombinedFn: ctx.save_for_backward at :888); causal-conv1d 0d2252d "
                       "causal_conv1d/causal_conv1d_interface.py:59; HF falcon_h1 modeling_falcon_h1.py:694-721")


def mamba2_mixer(gate: str = "silu", in_bias: bool = False, conv_bias: bool = True, out_bias: bool = False,
                 share: Expr = Integer(1), source: str = MAMBA_SOURCE, kernel: str = "torch") -> Part:
    """A Mamba2 mixer (SSD: Dao & Gu 2024) as transformers 5.24.0 runs it without the CUDA kernels
    (``torch_forward``: FalconH1Mixer, GraniteMoeHybridMambaLayer; the chunked scan
    ``mamba2_chunk_scan``), in its letters: n_m heads of width d_m (inner width I = n_m·d_m), g_m
    groups of B and C with state d_s, a depthwise causal conv1d of p_c + 1 taps (padding p_c) over the
    C = I + 2·g_m·d_s channels of x|B|C, the scan in s/Q chunks of Q tokens.

    Parameters: in_proj h → 2I + 2·g_m·d_s + n_m (z | x B C | dt, ``in_bias``), conv1d C×(p_c + 1)
    (``conv_bias``: C), dt_bias, A_log and D (n_m each), the gated norm's weight I (not for
    ``silu``), out_proj I → h (``out_bias``).

    Saved (traced, 2 layers less 1): in_proj's input; in_proj's whole output (the conv's input is a
    transposed slice of it, silu(z) reads another); the conv's output before the causal slice,
    (b, C, s + p_c), kept by the activation; dt + dt_bias (softplus) and softplus's output
    (the clamp to time_step_limit); in fp32: the D-skip's padded x, dt twice (x·dt and A·dt each
    upcast), x, the decay L = exp(segsum) (b, n_m, s/Q, Q, Q), the einsums' contiguous operand
    copies (bmm), G = C·Bᵀ per chunk, the chunk-boundary states (s/Q + 1 of them, d_m·d_s per
    head, a copy for the recurrence and one of the first s/Q for C·states), the decays, C·states;
    A = −exp(A_log) twice (n_m, fp32) and four bool masks of segment_sum ((Q, Q) twice and
    (s/Q + 1)² twice): per layer, not per token; then the gated norm (``gate``, see
    :data:`MAMBA_GATES`) and out_proj's input.

    Condition: s a multiple of Q with at least two chunks (s ≥ 2·Q). Otherwise HF pads the scan
    to ⌈s/Q⌉·Q tokens, and with one chunk the einsums take two operands as views (not copies):
    the bill's family reader states that.

    ``kernel="fused"``: what the CUDA kernel keeps instead (mamba-ssm's MambaSplitConv1dScanCombinedFn,
    :data:`MAMBA_KERNEL_SOURCE`: conv, scan, gated norm and out_proj in one autograd Function): in_proj's
    input (HF's nn.Linear, outside it) and, by the Function, in_proj's whole output zxbcdt, the scan's
    output before the gate (bf16), the gated RMSNorm's fp32 rstd per group (not for ``silu``) and A; the
    conv's output, the scan's intermediates and out_proj's input are recomputed in backward. Its
    matmuls are the torch path's (the kernel passes the chunk states elementwise, not by the
    (s/Q + 1)²·d_m·d_s einsum: 6·b·n_m·(s/Q + 1)²·d_m·d_s FLOPs per layer fewer, not followed).

    FLOPs as FlopCounterMode counts them: in_proj, out_proj,
    the conv 2·b·(s + p_c)·(p_c + 1)·C (its backward twice that: the input's gradient and the weight's;
    torch 2.13's formula ignores ``groups`` for the weight's, see ``symbolic.trace.cpu_sdpa_flops``),
    and the scan's five einsums (bmm).
    """
    from ...core.dims import d_m, d_s, g_m, p_c, n_m, Q
    if gate not in MAMBA_GATES:
        raise ValueError(f"Mamba2 gate must be one of {MAMBA_GATES}, not {gate!r}")
    inner = n_m * d_m
    groups = g_m * d_s
    channels = inner + 2 * groups
    chunks = s / Q
    projection = 2 * inner + 2 * groups + n_m

    def layer_term(name, shape, dtype, note):  # per layer, not per token
        shape = tuple(shape) if share == 1 else (share, *shape)
        return SavedTensor(name, shape, dtype, Axis.NONE, None, Group.BODY, source, note)

    def tokens(name, last, dtype, note):  # per token, split across the heads (tensor-parallel)
        return _split(name, last, dtype, note, source, share)

    params = (*_linear_params("mamba/in_proj", h, projection, in_bias, source, "z | x B C | dt", share),
              _weight("mamba/conv1d_weight", (channels, p_c + 1), source,
                      "depthwise: one filter of p_c + 1 taps per channel", share),
              *((_weight("mamba/conv1d_bias", (channels,), source, share=share),) if conv_bias else ()),
              _weight("mamba/dt_bias", (n_m,), source, share=share),
              _weight("mamba/A_log", (n_m,), source, share=share),
              _weight("mamba/D", (n_m,), source, share=share),
              *((_weight("mamba/norm_weight", (inner,), source, "gated RMSNorm", share),) if gate != "silu" else ()),
              *_linear_params("mamba/out_proj", inner, h, out_bias, source, share=share))
    if kernel == "fused":
        return Part(params, (
            _tokens("mamba/in_proj_input", h, note="in_proj's input (HF's nn.Linear, outside the kernel)",
                    source=source, share=share),
            layer_term("mamba/A_exp", (n_m,), "fp32", "exp(A_log.float()), kept by exp's backward (outside)"),
            SavedTensor("mamba/in_proj_output", (s, b, projection) if share == 1 else (share, s, b, projection),
                        "bf16", Axis.TENSOR, 2 if share == 1 else 3, Group.BODY, MAMBA_KERNEL_SOURCE,
                        "zxbcdt, in_proj's whole output, kept by the fused kernel (conv, scan, norm and out_proj "
                        "recomputed from it in backward)"),
            SavedTensor("mamba/scan_output", (s, b, inner) if share == 1 else (share, s, b, inner), "bf16",
                        Axis.TENSOR, 2 if share == 1 else 3, Group.BODY, MAMBA_KERNEL_SOURCE,
                        "out_x, the scan's output before the gate, in the activation dtype"),
            *((SavedTensor("mamba/norm_rstd", (s, b, g_m) if share == 1 else (share, s, b, g_m), "fp32",
                           Axis.TENSOR, 2 if share == 1 else 3, Group.BODY, MAMBA_KERNEL_SOURCE,
                           "the gated RMSNorm's rstd per group, fp32"),) if gate != "silu" else ()),
            layer_term("mamba/A", (n_m,), "fp32", "A = −exp(A_log), kept by the kernel")), _mixer_matmuls(share))
    conv_out = (b, channels, s + p_c) if share == 1 else (share, b, channels, s + p_c)
    saved = [
        _tokens("mamba/in_proj_input", h, note="in_proj's input (replicated under tensor parallelism)", source=source,
                share=share),
        tokens("mamba/in_proj_output", projection, "bf16", "in_proj's whole output z | x B C | dt: the conv's input "
               "and silu(z)'s are slices of it"),
        layer_term("mamba/A_exp", (n_m,), "fp32", "exp(A_log.float()), kept by exp's backward"),
        SavedTensor("mamba/conv_output", conv_out, "bf16", Axis.TENSOR, len(conv_out) - 2, Group.BODY, source,
                    "the conv's output, s + p_c positions (padded p_c both ends), kept whole by the activation "
                    "of its causal slice"),
        tokens("mamba/dt_bias_sum", n_m, "bf16", "dt + dt_bias, softplus's input"),
        tokens("mamba/dt_softplus", n_m, "bf16", "softplus(dt + dt_bias), the clamp's input (time_step_limit)"),
        tokens("mamba/x_padded", inner, "fp32", "x upcast and padded, kept by the D-skip's multiply"),
        tokens("mamba/dt_fp32", n_m, "fp32", "dt upcast, kept by x·dt"),
        tokens("mamba/x_fp32", inner, "fp32", "x upcast, kept by x·dt"),
        tokens("mamba/dt_fp32_A", n_m, "fp32", "dt upcast again, kept by A·dt"),
        layer_term("mamba/A", (n_m,), "fp32", "A = −exp(A_log), kept by A·dt"),
        layer_term("mamba/segsum_masks", (2, Q, Q), "mask", "segment_sum's two (Q, Q) masks, kept by "
                   "masked_fill"),
        tokens("mamba/decay_L", n_m * Q, "fp32", "L = exp(segsum(A·dt)) per head and chunk, (Q, Q) each"),
        tokens("mamba/B_operand", n_m * d_s, "fp32", "B repeated to the heads, copied as C·Bᵀ's operand"),
        tokens("mamba/C_operand", n_m * d_s, "fp32", "C repeated to the heads, copied as C·Bᵀ's operand"),
        tokens("mamba/G", n_m * Q, "fp32", "G = C·Bᵀ per chunk, kept by G·L"),
        tokens("mamba/x_dt_operand", inner, "fp32", "x·dt in chunks, copied as the intra-chunk einsum's operand"),
        tokens("mamba/M_operand", n_m * Q, "fp32", "M = G·L, copied as the intra-chunk einsum's operand"),
        tokens("mamba/decay_states", n_m, "fp32", "exp(A_cumsum[-1] − A_cumsum), kept by B·decay"),
        tokens("mamba/B_chunks", n_m * d_s, "fp32", "B in chunks, kept by B·decay"),
        tokens("mamba/B_decay_operand", n_m * d_s, "fp32", "B·decay, copied as the chunk-states einsum's operand"),
        tokens("mamba/x_dt_states_operand", inner, "fp32", "x·dt, copied again (transposed) as the chunk-states "
               "einsum's operand"),
        layer_term("mamba/segsum_chunk_masks", (2, chunks + 1, chunks + 1), "mask", "segment_sum's two masks over "
                   "the s/Q + 1 chunk boundaries, kept by masked_fill"),
        SavedTensor("mamba/decay_chunk", (b, n_m, chunks + 1, chunks + 1) if share == 1 else
                    (share, b, n_m, chunks + 1, chunks + 1), "fp32", Axis.TENSOR, 1 if share == 1 else 2,
                    Group.BODY, source, "exp(segsum) over the chunk boundaries, kept by the recurrence's einsum"),
        SavedTensor("mamba/states_operand", (b, chunks + 1, inner * d_s) if share == 1 else
                    (share, b, chunks + 1, inner * d_s), "fp32", Axis.TENSOR, 2 if share == 1 else 3, Group.BODY,
                    source, "the initial and s/Q chunk states (d_m·d_s per head), copied as the recurrence's "
                    "operand"),
        tokens("mamba/state_decay_out", n_m, "fp32", "exp(A_cumsum), kept by C·states·decay"),
        SavedTensor("mamba/new_states_operand", (b, chunks, inner * d_s) if share == 1 else
                    (share, b, chunks, inner * d_s), "fp32", Axis.TENSOR, 2 if share == 1 else 3, Group.BODY, source,
                    "each chunk's start state, copied as C·states's operand"),
        tokens("mamba/C_states_operand", n_m * d_s, "fp32", "C in chunks, copied as C·states's operand"),
        tokens("mamba/C_states", inner, "fp32", "C·states, kept by its decay multiply"),
    ]
    if gate == "silu":  # y·silu(z): silu keeps z (a slice of in_proj's output), the multiply both factors
        saved += [tokens("mamba/gate_silu", inner, "bf16", "silu(z), kept by y·silu(z)"),
                  tokens("mamba/scan_output", inner, "fp32", "the scan's output y, kept by y·silu(z)")]
    elif gate in ("norm_gate", "gate_norm"):
        saved += [tokens("mamba/gate_fp32", inner, "fp32", "z upcast, silu's input"),
                  tokens("mamba/gate_silu", inner, "fp32", "silu(z), kept by the gate's multiply"),
                  tokens("mamba/norm_input", inner, "fp32", "the norm's input (y, or y·silu(z)), kept by pow and "
                         "by x·rstd" if gate == "gate_norm" else "y, the norm's input, kept by pow and x·rstd"),
                  tokens("mamba/norm_rstd", g_m, "fp32", "rsqrt(mean(x²) + eps) per group"),
                  tokens("mamba/norm_normalized", inner, "fp32", "x·rstd in fp32, kept for the weight's gradient"),
                  tokens("mamba/norm_gated" if gate == "norm_gate" else "mamba/scan_output", inner, "fp32",
                         "weight·x·rstd, kept by the gate's multiply" if gate == "norm_gate" else
                         "the scan's output y, kept by y·silu(z)")]
    saved.append(tokens("mamba/out_proj_input", inner, "bf16", "out_proj's input"))

    return Part(params, tuple(saved), _mixer_matmuls(share))


def _mixer_matmuls(share: Expr = Integer(1), source: str = MAMBA_SOURCE) -> tuple:
    """A Mamba2 mixer's matmuls as FlopCounterMode counts the torch path (:func:`mamba2_mixer`)."""
    from ...core.dims import d_m, d_s, g_m, n_m, p_c, Q
    inner, chunks = n_m * d_m, s / Q
    channels = inner + 2 * g_m * d_s

    def einsum(name, batch, m, k_, n, note):
        return Matmul(f"layer/mamba/{name}", batch * share, m, k_, n, False, "layer", source, note)
    return (
        _linear("mamba/in_proj", h, 2 * inner + 2 * g_m * d_s + n_m, source, batch=share),
        Matmul("layer/mamba/conv1d", b * share, s + p_c, p_c + 1, channels, True, "layer", source,
               "depthwise: p_c + 1 taps per channel at each of s + p_c output positions"),
        einsum("scan_CB", b * n_m * chunks, Q, d_s, Q, "G = C·Bᵀ in each chunk"),
        einsum("scan_intra", b * n_m * chunks, Q, Q, d_m, "M·x within each chunk"),
        einsum("scan_states", b * n_m * chunks, d_m, Q, d_s, "each chunk's state from B·decay and x"),
        einsum("scan_recurrence", b * n_m, chunks + 1, chunks + 1, d_m * d_s, "the states across chunk "
               "boundaries"),
        einsum("scan_C_states", b * n_m * chunks, Q, d_s, d_m, "C·state at each chunk's start"),
        _linear("mamba/out_proj", inner, h, source, batch=share),
    )


# --- hybrid layers: kinds of layer as shares, and their token mixers ------------------

LFM2 = f"{HF} models/lfm2/modeling_lfm2.py"
#: Dao-AILab/causal-conv1d at 0d2252d161f25f7907bbd05985c08ab98d255874, causal_conv1d/causal_conv1d_interface.py:
#: ``CausalConv1dFn.forward`` saves (x, weight, bias, seq_idx, initial_states) and returns an output of s positions
CAUSAL_CONV1D = "causal-conv1d 0d2252d causal_conv1d_interface.py CausalConv1dFn"


def scaled(part: Part, share: Expr) -> Part:
    """``part`` on a share of the layers only (a hybrid: L_c/L of them a short convolution, the rest
    attention): every parameter and saved tensor gets the share as a leading factor and every matmul's
    batch is multiplied by it, so the totals over the L layers are exact and a layer's terms are the
    layers' average (as :func:`dense_share`'s MoE and dense MLP, :func:`rope_share`'s RoPE and NoPE layers)."""
    if share == 1:
        return part

    def saved(t):
        return replace(t, shape=(share, *t.shape), split_dim=None if t.split_dim is None else t.split_dim + 1)
    return Part(tuple(replace(p, shape=(share, *p.shape)) for p in part.params), tuple(saved(t) for t in part.saved),
                tuple(replace(m, batch=m.batch * share, backward=None if m.backward is None else m.backward * share)
                      for m in part.matmuls))


def short_conv(bias: bool = False, conv: Conventions | None = None, width: Expr = h, layer_input: bool = False) -> Part:
    """LFM2's double-gated short convolution (transformers 5.24.0 models/lfm2/modeling_lfm2.py:316-383,
    ``Lfm2ShortConv``): in_proj h → 3h, its output transposed to channels-first and chunked into B, C and x
    (views of one storage), B·x, a depthwise causal conv1d of K_c taps (``conv_L_cache``), C·conv, the
    product made contiguous token-major, out_proj h → h; ``bias`` (``conv_bias``) on all three.

    Kept: in_proj's input; its 3h-wide output (B and x kept by B·x, C by C·conv: one storage); B·x, the
    conv's input; the conv's output, kept by C·conv; out_proj's input. The conv's output on the CPU
    backend (``conv.name == "cpu"``: HF's torch ``causal_conv1d_fn``, :293-313, ``F.conv1d`` padded
    K_c − 1 on both sides, cut to the first s positions by a view) is the whole padded output, s + K_c − 1
    positions per channel (traced); on CUDA, where HF calls the causal-conv1d package when it is installed,
    ``CausalConv1dFn`` (:data:`CAUSAL_CONV1D`) returns s positions and saves its input and weight — the
    same input, so the two differ by the K_c − 1 padded positions of the output alone.

    Matmuls: the two projections, and the conv as b·h dot products of K_c taps at the s + K_c − 1 positions
    torch's padded conv computes (FlopCounterMode's forward count; backward: the input's and the weight's
    gradients, as many each — the weight's counted per channel, the depthwise conv's groups)."""
    from ...core.dims import K_c
    cpu = conv is not None and conv.name == "cpu"
    positions = s + K_c - 1 if cpu else s
    params = (*_linear_params("conv/in_proj", width, 3 * width, bias, LFM2, "B, C and x: one h → 3h projection"),
              _weight("conv/conv_weight", (width, K_c), LFM2, "depthwise: one kernel of K_c taps per channel"),
              *((_weight("conv/conv_bias", (width,), LFM2),) if bias else ()),
              *_linear_params("conv/out_proj", width, width, bias, LFM2))
    matmuls = (_linear("conv/in_proj", width, 3 * width, LFM2),
               Matmul("layer/conv/conv", b * width, s + K_c - 1, K_c, Integer(1), True, "layer", LFM2,
                      "depthwise causal conv1d: per channel, K_c taps at each of the s + K_c − 1 padded positions"),
               _linear("conv/out_proj", width, width, LFM2))
    output_note = ("the conv's whole output, s + K_c − 1 positions per channel (F.conv1d padded both sides; "
                   "the cut to s is a view), kept by C·conv" if cpu else
                   "the conv's output (causal-conv1d: s positions), kept by C·conv")
    saved = (
        _tokens("conv/in_proj_input", width, group=Group.LAYER_INPUT if layer_input else Group.BODY,
                note="the operator norm's output, in_proj's input", source=LFM2),
        _split("conv/in_proj_output", 3 * width, note="B, C and x: one storage, kept by B·x and C·conv", source=LFM2),
        _split("conv/conv_input", width, note="B·x, the conv's input" + ("" if cpu else " (CausalConv1dFn saves it)"),
               source=LFM2 if cpu else CAUSAL_CONV1D),
        SavedTensor("conv/conv_output", (positions, b, width), "bf16", Axis.TENSOR, 2, Group.BODY,
                    LFM2 if cpu else CAUSAL_CONV1D, output_note),
        _split("conv/out_proj_input", width, note="C·conv made contiguous token-major, out_proj's input", source=LFM2),
    )
    return Part(params, saved, matmuls)


QWEN3_NEXT = f"{HF} models/qwen3_next/modeling_qwen3_next.py"


def gated_query(projections: Part, width: Expr) -> Part:
    """Qwen3-Next's gated attention (transformers 5.24.0 models/qwen3_next/modeling_qwen3_next.py:229-304,
    ``Qwen3NextAttention``): ``q_proj`` is h → 2·a·d_h, each head's query and gate side by side; the projections
    of :func:`attention_projections` with Q's weight, bias and matmul twice as wide."""
    def wider(term):
        if term.name in ("layer/attention/query_weight", "layer/attention/query_bias"):
            return replace(term, shape=term.shape[:-1] + (2 * term.shape[-1],),
                           note="query and output gate, per head side by side", source=QWEN3_NEXT)
        return term

    def wider_matmul(mm):
        if mm.name == "layer/attention/query":
            return replace(mm, N=2 * mm.N, note="query and output gate", source=QWEN3_NEXT)
        return mm
    return Part(tuple(wider(p) for p in projections.params), projections.saved,
                tuple(wider_matmul(mm) for mm in projections.matmuls))


def output_gate(width: Expr) -> Part:
    """The gate of Qwen3-Next's attention output (modeling_qwen3_next.py:300-303): ``attn_output *
    torch.sigmoid(gate)``, the gate half of q_proj's output made contiguous token-major (a copy no one keeps):
    the sigmoid keeps its output, the multiply its other operand (the attention's output, token-major: the
    core's ``output_copy``), and the product is the output projection's input."""
    return Part(saved=(
        _split("attention/output_gate_sigmoid", a * width, note="sigmoid(gate), kept by the gating multiply",
               source=QWEN3_NEXT),
        _split("attention/gated_output", a * width, note="attention output × sigmoid(gate), the output "
               "projection's input", source=QWEN3_NEXT),
    ))


#: fla-org/flash-linear-attention at bc3b101dcb713ddc5bd8924b66754eb68b5ccf89,
#: fla/ops/gated_delta_rule/chunk.py:310-326: ``ChunkGatedDeltaRuleFunction.forward`` saves q, q_rstd, k, k_rstd,
#: v, g (cumsum'd, fp32), beta and A (bf16, 64 per head and position: chunk_fwd.py:385)
FLA_GDN = "flash-linear-attention bc3b101 fla/ops/gated_delta_rule/chunk.py ChunkGatedDeltaRuleFunction"

#: torch_chunk_gated_delta_rule's chunk length (its ``chunk_size`` default, which Qwen3NextGatedDeltaNet keeps)
DELTA_CHUNK = 64


def gated_deltanet(conv: Conventions | None = None, layer_input: bool = False, final_state: bool = True) -> Part:
    """Qwen3-Next's linear attention, the gated DeltaNet (transformers 5.24.0
    models/qwen3_next/modeling_qwen3_next.py:583-769, ``Qwen3NextGatedDeltaNet``), on HF's torch path
    (``torch_chunk_gated_delta_rule``, :371-510, which CPU runs; GPU: see the family's note).

    Projections: in_proj_qkvz h → 2·H_k·D_k + 2·H_v·D_v (q, k, v, the output gate z), in_proj_ba h → 2·H_v
    (β's and the decay's inputs); q|k|v through a depthwise causal conv1d of K_c taps (no bias) and SiLU;
    β = sigmoid(b); the decay g = −exp(A_log)·softplus(a + dt_bias) in fp32 (A_log, dt_bias: H_v each). The
    rule: q and k repeated to H_v heads, everything in fp32, q and k L2-normalised, q scaled, padded to
    64·⌈s/64⌉ positions and cut into chunks of 64; per chunk the decays (pairwise, exp'd), the UT system
    k_β·kᵀ and the within-chunk q·kᵀ, two triangular solves (new values, decayed keys), then a scan over the
    chunks reading and updating a (D_k, D_v) state per head. Out: a gated RMSNorm over each value head (weight
    D_v; x·rstd cast back, × weight, × SiLU(z) in fp32, cast back), out_proj H_v·D_v → h.

    On CUDA (``conv.name != "cpu"``), where HF calls causal-conv1d (SiLU fused) and FLA's
    ``chunk_gated_delta_rule`` (:data:`FLA_GDN`) when they are installed: the conv keeps its input only, and the
    rule keeps what ``ChunkGatedDeltaRuleFunction`` saves — q and k L2-normalised in bf16 with their fp32 rstd
    (H_k heads: no repeat), v, the decay's fp32 cumsum, β (the sigmoid's output, already kept) and A, 64 bf16
    values per value head and position; everything between is recomputed in its backward.

    Kept (traced): the shared projection input; the conv's input and its padded output (SiLU's input); β; the
    decay's fp32 pieces; the fp32 q and k (L2 norm's inputs) and their rstd; padded fp32 β, v and k; the
    chunk mask; per chunk the exp'd pairwise decays, k_β, k_β·kᵀ, the scaled q, q·kᵀ, the UT system, the two
    solves' outputs, the two exp'd decay vectors, the within-chunk attention and the new values; the zero
    initial state; the decayed k (whole) and the chunk decays, kept by the state updates that are read — the
    last one's too with ``final_state`` (HF's cache holds the final state: the config's ``use_cache``, true by
    default), else from two chunks on; from two chunks on, the states read and the decayed q (whole);
    the gated norm's tensors and out_proj's input."""
    from sympy import Max, ceiling

    from ...core.dims import D_k, D_v, H_k, H_v, K_c
    chunks = ceiling(s / DELTA_CHUNK)
    padded = DELTA_CHUNK * chunks
    from_two = (chunks - 1) - Max(chunks - 2, 0)  # 1 when there are two chunks or more, else 0
    read = Integer(1) if final_state else from_two  # a state update is read: the cache's, or the next chunk's
    keys, values = H_k * D_k, H_v * D_v
    conv_dim = 2 * keys + values
    src = QWEN3_NEXT
    params = (_weight("linear_attention/in_proj_qkvz_weight", (h, 2 * keys + 2 * values), src, "q, k, v and z"),
              _weight("linear_attention/in_proj_ba_weight", (h, 2 * H_v), src, "β's and the decay's inputs"),
              _weight("linear_attention/conv_weight", (conv_dim, K_c), src, "depthwise, no bias"),
              _weight("linear_attention/dt_bias", (H_v,), src),
              _weight("linear_attention/A_log", (H_v,), src),
              _weight("linear_attention/norm_weight", (D_v,), src, "gated RMSNorm, shared by the value heads"),
              _weight("linear_attention/out_proj_weight", (values, h), src))
    n = b * H_v  # the rule's (batch, head) pairs

    def rule(name, shape, dtype="fp32", note=""):  # per head, heads on axis 1 (split by TP)
        return SavedTensor(f"linear_attention/{name}", shape, dtype, Axis.TENSOR, 1, Group.BODY, src, note)

    def layer_constant(name, shape, dtype, note):
        return SavedTensor(f"linear_attention/{name}", shape, dtype, Axis.NONE, None, Group.BODY, src, note)

    chunk_square = (b, H_v, padded, DELTA_CHUNK)  # one 64 × 64 matrix per chunk and head
    saved = (
        _tokens("linear_attention/in_proj_input", h, group=Group.LAYER_INPUT if layer_input else Group.BODY,
                note="the input norm's output, in_proj_qkvz's and in_proj_ba's input", source=src),
        _split("linear_attention/conv_input", conv_dim, note="q|k|v concatenated, the conv's input", source=src),
        SavedTensor("linear_attention/conv_output", (s + K_c - 1, b, conv_dim), "bf16", Axis.TENSOR, 2, Group.BODY,
                    src, "the conv's padded output, s + K_c − 1 positions (the cut to s a view), SiLU's input"),
        _split("linear_attention/beta", H_v, note="sigmoid(b), kept by its backward", source=src),
        layer_constant("decay_rate", (2 * H_v,), "fp32", "exp(A_log) and its negation, fp32: per layer"),
        _split("linear_attention/softplus_input", H_v, "fp32", "a + dt_bias in fp32, softplus's input", src),
        _split("linear_attention/softplus_output", H_v, "fp32", "softplus(a + dt_bias), kept by the decay's "
               "multiply", src),
        rule("query_fp32", (b, H_v, s, D_k), note="q repeated to H_v heads in fp32: the L2 norm's input"),
        rule("query_rstd", (b, H_v, s), note="q's L2 norm: rsqrt(Σq² + ε) per head and position"),
        rule("key_fp32", (b, H_v, s, D_k), note="k repeated to H_v heads in fp32: the L2 norm's input"),
        rule("key_rstd", (b, H_v, s), note="k's L2 norm: rsqrt(Σk² + ε)"),
        rule("beta_padded", (b, H_v, padded), note="β in fp32, padded to the chunks, kept by k·β and v·β"),
        rule("value_padded", (b, H_v, padded, D_v), note="v in fp32, padded, kept by v·β"),
        rule("key_padded", (b, H_v, padded, D_k), note="normalised k, padded, kept by k·β and the two ·kᵀ"),
        layer_constant("chunk_mask", (Integer(DELTA_CHUNK), Integer(DELTA_CHUNK)), "mask",
                       "the strictly upper triangle of a chunk, kept by masked_fill: per layer"),
        rule("pairwise_decay", chunk_square, note="exp of the pairwise decays within each chunk"),
        rule("key_beta", (b, H_v, padded, D_k), note="k·β, kept by k_β·kᵀ and k_β·exp(decay)"),
        rule("ut_product", chunk_square, note="k_β·kᵀ, kept by × pairwise decay"),
        rule("query_scaled", (b, H_v, padded, D_k), note="q / √D_k, padded, kept by q·kᵀ and q·exp(decay)"),
        rule("qk_product", chunk_square, note="q·kᵀ, kept by × pairwise decay"),
        rule("decay_exp", (b, H_v, 2 * padded), note="exp(cumulative decay), computed twice (for k_β and for "
             "q), each kept by its multiply"),
        rule("ut_system", chunk_square, note="the UT system, kept by both triangular solves"),
        rule("new_values", (b, H_v, padded, D_v), note="solve(UT, v·β): the solve's output, kept by its backward"),
        rule("key_cumdecay", (b, H_v, padded, D_k), note="solve(UT, k_β·exp(decay)), kept by its backward "
             "and by the state reads"),
        rule("initial_state", (b, H_v, D_k, D_v), note="the zero state, kept by the first chunk's reads"),
        rule("chunk_attention", chunk_square, note="the within-chunk attention, kept by ·v_new"),
        rule("chunk_values", (b, H_v, padded, D_v), note="each chunk's v_new, kept by ·v_new and the state update"),
        rule("states", (b, H_v, (chunks - 1) * D_k, D_v), note="the state each chunk after the first reads"),
        rule("query_decayed", (b, H_v, from_two * padded, D_k), note="q·exp(decay), kept whole by the state "
             "reads from the second chunk on"),
        rule("key_decayed", (b, H_v, read * padded, D_k + 1), note="k·exp(decay to the chunk's end) and that "
             "exp, kept by the state updates that are read (by the next chunk; the last by HF's cache)"),
        rule("chunk_decay", (b, H_v, read * chunks), note="exp of each chunk's total decay, kept by its backward "
             "once a state update is read"),
        _split("linear_attention/norm_input_fp32", values, "fp32", "the rule's output in fp32: pow's and "
               "x·rstd's input", src),
        _split("linear_attention/norm_rstd", H_v, "fp32", "rsqrt(mean(x²) + ε) per value head", src),
        _split("linear_attention/norm_normalized", values, note="x·rstd cast back, kept by × weight", source=src),
        _split("linear_attention/gate_fp32", values, "fp32", "z in fp32, SiLU's input", src),
        _split("linear_attention/gate_silu", values, "fp32", "SiLU(z), kept by the gating multiply", src),
        _split("linear_attention/norm_weighted", values, note="weight·x, kept by the gating multiply", source=src),
        _split("linear_attention/out_proj_input", values, note="the gated norm's output cast back, out_proj's "
               "input", source=src),
    )
    if conv is None or conv.name != "cpu":  # on GPU: causal-conv1d's conv and FLA's chunk_gated_delta_rule
        gpu = (
            _split("linear_attention/query_normalized", keys, note="q L2-normalised (l2norm_fwd), bf16",
                   source=FLA_GDN),
            _split("linear_attention/query_rstd", H_k, "fp32", "q's rstd per head and position", FLA_GDN),
            _split("linear_attention/key_normalized", keys, note="k L2-normalised, bf16", source=FLA_GDN),
            _split("linear_attention/key_rstd", H_k, "fp32", "k's rstd per head and position", FLA_GDN),
            _split("linear_attention/value", values, note="v made contiguous (input_guard), bf16", source=FLA_GDN),
            _split("linear_attention/decay_cumsum", H_v, "fp32", "the decay's chunk-local cumsum, fp32",
                   FLA_GDN),
            _split("linear_attention/ut_inverse", H_v * DELTA_CHUNK, note="A, the solved (I + A)⁻¹ of each chunk: "
                   "64 values per head and position, bf16", source=FLA_GDN),
        )
        traced_only = ("conv_output", "query_fp32", "query_rstd", "key_fp32", "key_rstd", "beta_padded")
        start = next(i for i, t in enumerate(saved) if t.name == "linear_attention/value_padded")
        end = next(i for i, t in enumerate(saved) if t.name == "linear_attention/norm_input_fp32")
        saved = tuple(t for t in saved[:start] if t.name.removeprefix("linear_attention/") not in traced_only) \
            + gpu + saved[end:]
    c = Integer(DELTA_CHUNK)
    solves = 2 * n * chunks * c * c * (D_v + D_k)  # their backward's −grad·Xᵀ bmm, one per solve
    one_state = 2 * n * c * D_k * D_v
    matmuls = (
        _linear("linear_attention/in_proj_qkvz", h, 2 * keys + 2 * values, src),
        _linear("linear_attention/in_proj_ba", h, 2 * H_v, src),
        Matmul("layer/linear_attention/conv", b * conv_dim, s + K_c - 1, K_c, Integer(1), True, "layer", src,
               "depthwise causal conv1d over the s + K_c − 1 padded positions"),
        Matmul("layer/linear_attention/ut_system", n * chunks, c, D_k, c, False, "layer", src,
               "k_β·kᵀ per chunk; backward also the two triangular solves' −grad·Xᵀ",
               backward=4 * n * chunks * c * D_k * c + solves),
        Matmul("layer/linear_attention/chunk_scores", n * chunks, c, D_k, c, False, "layer", src, "q·kᵀ per chunk"),
        Matmul("layer/linear_attention/first_state_reads", 2 * n, c, D_k, D_v, False, "layer", src,
               "k_cumdecay·S and q·S of the first chunk: the zero state needs no gradient", backward=2 * one_state),
        Matmul("layer/linear_attention/state_reads", 2 * n * (chunks - 1), c, D_k, D_v, False, "layer", src,
               "k_cumdecay·S and q·S of the chunks after the first"),
        Matmul("layer/linear_attention/chunk_output", n * chunks, c, c, D_v, False, "layer", src,
               "within-chunk attention · v_new"),
        Matmul("layer/linear_attention/state_updates", n * (chunks - 1), D_k, c, D_v, False, "layer", src,
               "kᵀ·v_new into the state, every chunk but the last"),
        Matmul("layer/linear_attention/last_state_update", n, D_k, c, D_v, False, "layer", src,
               "the last chunk's state update: its result (the final state) is HF's cache's, outside the loss: no "
               "backward", backward=Integer(0)),
        _linear("linear_attention/out_proj", values, h, src),
    )
    return Part(params, saved, matmuls)
