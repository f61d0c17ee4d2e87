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

