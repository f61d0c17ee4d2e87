"""dots.llm1 (HF ``model_type`` dots1), as ``modeling_dots1.py`` of transformers 5.24.0 builds it.

Dots1DecoderLayer (:377-423): pre-RMSNorm (Llama's), sequential; layer i has Dots1MoE iff
i >= ``first_k_dense_replace`` (:384-387; 0 by default, 1 in dots.llm1), else a dense Dots1MLP of
``intermediate_size`` (f; the first L_d layers). Dots1Attention (:183-250): Qwen3's — Q, K, V and O
with ``attention_bias``, RMSNorm over each head's width on Q and K (:209-210, always), full
rotary; a layer of ``layer_types`` "sliding_attention" (``sliding_window`` set and
i >= ``max_window_layers``) is given a windowed mask (:211, :247, :512; configuration_dots1.py
``__post_init__``): stated, with what SDPA keeps more beyond the window (:func:`window_note`). Dots1MoE (:353-374): Dots1TopkRouter (:272-310) — DeepSeek-V3's router
(fp32 logits, sigmoid, ``e_score_correction_bias`` buffer, grouped top-k, ``norm_topk_prob``,
``routed_scaling_factor``), Dots1Experts' eager loop (:314-350) of E experts of
``moe_intermediate_size``, one shared MLP of ``moe_intermediate_size``·``n_shared_experts``
(:363-365); the config class leaves ``n_routed_experts``, ``n_shared_experts`` and
``num_experts_per_tok`` None, which HF cannot build: they are required.
"""
from ..config import Recipe
from .base import Read, head_width, source
from .glm4_moe import sigmoid_moe

MODEL_TYPE = "dots1"
TITLE = "dots.llm1"
SOURCE = source(MODEL_TYPE)
EXPERTS = "n_routed_experts"  #: the experts count's field (attribute_map: num_local_experts)
#: the reader states the sliding layers itself (their count and SDPA's gap), not the generic window note
READS_WINDOWS = True

#: configuration_dots1.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 10944, "max_position_embeddings": 2048, "num_key_value_heads": 32,
            "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False,
            "moe_intermediate_size": 1408, "num_experts_per_tok": None, "n_shared_experts": None,
            "n_routed_experts": None, "routed_scaling_factor": 1.0, "n_group": 1, "topk_group": 1,
            "first_k_dense_replace": 0, "norm_topk_prob": False, "sliding_window": 4096, "max_window_layers": 62,
            "layer_types": None}

# Its routers are ``architectures.composed.ROUTERS["deepseek_v3"]`` and ``["deepseek_v3_norm"]``.


def sliding_layers(fields) -> int:
    """The layers Dots1Config marks "sliding_attention": ``layer_types`` as given, else i >=
    ``max_window_layers`` when ``sliding_window`` is set."""
    types = fields.value("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != fields.layers or \
                any(kind not in ("full_attention", "sliding_attention") for kind in types):
            fields.refuse("layer_types", types, f"layer_types as {fields.layers} entries of full_attention or "
                          "sliding_attention")
        return types.count("sliding_attention")
    if fields.value("sliding_window") is None:
        return 0
    first = fields.value("max_window_layers")
    if isinstance(first, bool) or not isinstance(first, int):
        fields.refuse("max_window_layers", first, "max_window_layers as an integer")
    return max(0, fields.layers - max(first, 0))


def window_note(fields, sliding: int) -> str:
    """What HF does on the sliding-window layers, stated with its size (traced: tests/test_family_traces.py)."""
    window = fields.value("sliding_window")
    return (f"{sliding} of the {fields.layers} layers use a sliding window ({window} positions; layer_types / "
            "max_window_layers): HF applies it as a mask, so eager attention keeps and FlopCounterMode counts full "
            f"attention's tensors and s×s FLOPs, as the bill does, at any s (a kernel with a native window does "
            f"fewer attention FLOPs for s > {window}); under SDPA for s > {window} HF's path copies K and V to a "
            "heads and keeps a (b, 1, s, s) bf16 mask on each such layer: 4·s·b·(a − g)·d_h + 2·b·s² bytes per "
            "sliding layer the bill does not count (traced)")


def read(fields) -> Read:
    sliding = sliding_layers(fields)
    window = fields.value("sliding_window")
    if sliding and (isinstance(window, bool) or not isinstance(window, int) or window <= 0):
        fields.refuse("sliding_window", window, "a positive sliding_window for the layers layer_types marks "
                      "sliding_attention")
    moe, dims, numbers, notes = sigmoid_moe(fields, MODEL_TYPE)
    if sliding:
        notes.append(window_note(fields, sliding))
    bias = fields.flag("attention_bias")
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, qk_norm="head", activation=fields.activation(), **moe)
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=head_width(fields), dims=dims,
                moe=numbers, notes=tuple(notes))
