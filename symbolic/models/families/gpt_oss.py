"""gpt-oss (HF ``model_type`` gpt_oss: gpt-oss-20b, gpt-oss-120b), as ``modeling_gpt_oss.py`` and
``configuration_gpt_oss.py`` of transformers 5.24.0 build it (lines cited below are modeling_gpt_oss.py's).

GptOssDecoderLayer (:331-370): pre-RMSNorm, sequential. GptOssRMSNorm (:47-62) multiplies the weight
into the fp32 x·rstd before the cast back (``rmsnorm_fp32``: x·rstd kept in fp32). GptOssAttention
(:258-328): Q, K, V, O with ``attention_bias`` (default true), heads of ``head_dim`` (default 64, not
h/a), rotary by ``_apply_rotary_emb`` (:207-215: chunk, multiply by cos/sin, cat: nothing of the layer
kept), and ``sinks`` (:285), one learned logit per query head. HF allows no SDPA for gpt_oss
(``_supports_sdpa = False``, :380): on CPU it runs ``eager_attention_forward`` (:227-255), which
concatenates the sink to each score row, subtracts the row's max (its int64 index kept), takes the
softmax over s + 1 in the activation dtype (kept) and drops the sink column (a view) before ·V:
``architectures.parts.attention_sinks``. Flash (FA3 ``s_aux``, FA4 ``learnable_sink``) and flex
attention are its GPU paths (stated with their difference by :func:`read`).
GptOssMLP (:133-146): GptOssTopKRouter (:117-130: linear h → E with bias, top-k of the logits, softmax
over the k in the activation dtype) and GptOssExperts (:68-114): per expert a gate|up matmul
(E×h×2f_e, gate and up interleaved) plus a bias, ``_apply_gate`` (:82-88: gate clamped above at
``swiglu_limit``, up clamped both sides, glu = gate·sigmoid(``swiglu_alpha``·gate), (up + 1)·glu), down
(E×f_e×h) plus a bias, the routing weight's multiply and ``index_add_``: ``expert_parts.clamped_swiglu_experts``.
``hidden_act`` is not read by HF's gpt_oss (the experts' activation is fixed).
``layer_types`` (default sliding, full, sliding, ...: configuration_gpt_oss.py:84-87): a sliding layer
applies ``sliding_window`` as a mask (:284, :467-470), so what it keeps and what FlopCounterMode counts
are a full layer's on the traced path.
"""
from .. import windows
from ..config import Recipe
from .base import Read, expert_counts, no_attention_dropout, source

MODEL_TYPE = "gpt_oss"
TITLE = "gpt-oss"
SOURCE = source(MODEL_TYPE)
EXPERTS = "num_local_experts"  #: the experts count's field (attribute_map: num_experts)

#: configuration_gpt_oss.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 2880, "max_position_embeddings": 131072, "num_key_value_heads": 8, "head_dim": 64,
            "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": True, "attention_dropout": 0.0,
            "num_local_experts": 128, "num_experts_per_tok": 4, "swiglu_alpha": 1.702, "swiglu_limit": 7.0,
            "sliding_window": 128, "layer_types": None}

#: the layer kinds HF's gpt_oss builds (configuration_gpt_oss.py:84-87; GptOssModel.forward's two masks, :467-470)
LAYER_KINDS = ("sliding_attention", "full_attention")

# Its router is ``architectures.composed.ROUTERS["gpt_oss"]``.

#: the sliding layers (symbolic.models.windows): ``layer_types``, else sliding on even indices
#: (configuration_gpt_oss.py:84-87) — priced at the window's band on a kernel with a native window
WINDOWS = windows.Rule(layer_types=True, default=lambda i, value: (i + 1) % 2 == 1)


def layer_kinds(fields) -> tuple[int, int]:
    """(sliding layers, full layers) as GptOssConfig.__post_init__ fills ``layer_types`` in: the file's
    list, else sliding for even indices and full for odd ones."""
    types = fields.value("layer_types")
    if types is None:
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(fields.layers)]
    unknown = sorted({kind for kind in types if kind not in LAYER_KINDS})
    if unknown:
        fields.refuse("layer_types", unknown, "gpt_oss layer kinds sliding_attention and full_attention")
    sliding = sum(1 for kind in types if kind == "sliding_attention")
    return sliding, len(types) - sliding


def read(fields) -> Read:
    experts, top_k = expert_counts(fields, "num_local_experts")
    no_attention_dropout(fields, 'gpt-oss')
    for name in ("swiglu_alpha", "swiglu_limit"):  # multiplies and clamps by Python numbers: no tensor kept
        value = fields.value(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            fields.refuse(name, value, f"{name} as a number")
    sliding, full = layer_kinds(fields)
    window = fields.value("sliding_window")
    bias = fields.flag("attention_bias")
    recipe = Recipe(MODEL_TYPE, norm="rmsnorm_fp32", qkv_bias=bias, o_bias=bias, moe="gpt_oss", sinks=True)
    heads, kv_heads, head_dim = fields.heads, fields.count("num_key_value_heads", fields.heads), \
        fields.count("head_dim")
    hidden = fields.hidden
    notes = [
        f"layer_types: {sliding} sliding-window + {full} full-attention layers (window {window})",
        "attention is billed as a fused kernel with the sink in its log-sum-exp — Q, K, V, the output and the "
        "fp32 log-sum-exp (FlashAttention-4's learnable_sink, HF's flash path on GPU: Dao-AILab/flash-attention "
        "flash_attn/cute/interface.py:3117 at 0251105a, backward on SM90/SM100); HF's gpt_oss has no SDPA path "
        "(_supports_sdpa = False), and its eager attention, the CPU path, keeps K and V repeated to a heads, the "
        "(b, a, s, s + 1) bf16 softmax over the scores and the sink and the int64 index of each row's max: "
        "4·s·b·(a − g)·d_h + 2·b·a·s·(s + 1) + 4·b·a·s bytes per layer more "
        f"({4 * (heads - kv_heads) * head_dim + 6 * heads:,}·s·b + {2 * heads:,}·b·s² B; traced)",
        "HF's flex_attention path (GPU only: on CPU it refuses sinks) applies the sink outside the kernel, "
        "renormalising flex's output by its log-sum-exp (transformers 5.24.0 integrations/flex_attention.py:344-358, "
        "read, not traced): beyond the fused kernel 8·b·a·s bytes per layer (the (lse, sink) pair, the "
        f"combined log-sum-exp and the factor, bf16; {8 * heads:,}·b·s B) and the renormalised output, "
        f"2·s·b·a·d_h ({2 * heads * head_dim:,}·s·b B)",
        "the experts are billed as HF's eager experts loop runs them (GptOssExperts.forward, traced). "
        "from_pretrained's default experts_implementation is grouped_mm (modeling_utils.py "
        "get_correct_experts_implementation; integrations/moe.py grouped_mm_experts_forward): it keeps 4 int64 "
        "indices per token-expert pair instead of 2 and not index_add_'s input, (2·h − 16)·s·b·k − 4·E bytes per "
        f"layer fewer ({(2 * hidden - 16) * fields.count('num_experts_per_tok'):,}·s·b B; traced), with the same "
        "matmuls (FlopCounterMode does not count torch._grouped_mm); use_kernels' MegaBlocks MoE MLP is not "
        "itemised",
        f"the output side's final norm is counted as Llama's RMSNorm: gpt_oss's keeps x·rstd in fp32, 2·s·b·h "
        f"bytes more ({2 * hidden:,} B per token; the output side is reported beside the total, not in it)",
    ]
    ffn = fields.count("intermediate_size")
    return Read(recipe, ffn=ffn, kv_heads=kv_heads, seq=fields.count("max_position_embeddings"), head_dim=head_dim,
                moe=(experts, top_k, ffn, 0), notes=tuple(notes))
