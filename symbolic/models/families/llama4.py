"""Llama 4's text model (HF ``model_type`` llama4_text; ``llama4`` read through its ``text_config``),
as ``modeling_llama4.py`` and ``configuration_llama4.py`` of transformers 5.24.0 build it.

Llama4TextDecoderLayer: pre-RMSNorm (Llama's eager RMSNorm), sequential. Its layers differ by
index: layer i is an MoE layer when i is in ``moe_layers`` (default every
``interleave_moe_layer_step``-th: ``range(step − 1, L, step)``), else a dense Llama4TextMLP of
width ``intermediate_size_mlp`` (f; L_d of them); layer i has RoPE when ``no_rope_layers[i]`` is
truthy (default ``(i + 1) % no_rope_layer_interval != 0``), else none (NoPE: L_n of them).
Llama4TextAttention: Q, K, V, O (``attention_bias``), heads of ``head_dim``; ``use_qk_norm``:
Llama4TextL2Norm (no weight) on Q and K of the RoPE layers; ``attn_temperature_tuning``: Q scaled by
an fp32 per-position scale on the NoPE layers; eager attention's softmax in bf16 (no fp32 copy).
Llama4TextMoe: Llama4Router (top-k, sigmoid), every token through every one of the E experts of
width ``intermediate_size`` (its input scaled by its score), a shared expert of the same width
(f_s). The per-layer kinds are shares of the layer's terms ((L − L_d)/L, L_d/L; (L − L_n)/L,
L_n/L): totals over the model exact, a layer's terms the layers' average.
"""
from ..config import Recipe
from .base import Read, expert_counts, no_attention_dropout, source

MODEL_TYPE = "llama4_text"
TITLE = "Llama 4 (text)"
SOURCE = source("llama4")
EXPERTS = "num_local_experts"  #: the experts count's field

#: configuration_llama4.py's Llama4TextConfig defaults of the fields read
DEFAULTS = {"intermediate_size": 8192, "intermediate_size_mlp": 16384, "max_position_embeddings": 4096 * 32,
            "num_key_value_heads": 8, "head_dim": 128, "hidden_act": "silu", "tie_word_embeddings": False,
            "attention_bias": False, "attention_dropout": 0.0, "num_local_experts": 16, "num_experts_per_tok": 1,
            "moe_layers": None, "interleave_moe_layer_step": 1, "use_qk_norm": True, "no_rope_layers": None,
            "no_rope_layer_interval": 4, "attention_chunk_size": 8192, "attn_temperature_tuning": True}

# Its router is ``architectures.composed.ROUTERS["llama4"]``.


def _index_list(fields, name: str) -> list | None:
    value = fields.value(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        fields.refuse(name, value, f"{name} as a list of integers (or null)")
    return value


def layer_kinds(fields) -> tuple[int, int]:
    """(L_d, L_n): the dense layers (not in ``moe_layers``) and the NoPE layers (``no_rope_layers``
    falsy), as Llama4TextConfig.__post_init__ fills them in."""
    layers = fields.layers
    moe_layers = _index_list(fields, "moe_layers")
    if moe_layers is None:
        step = fields.count("interleave_moe_layer_step")
        moe_layers = list(range(step - 1, layers, step))
    elif any(not 0 <= i < layers for i in moe_layers):
        fields.refuse("moe_layers", moe_layers, f"MoE layer indices in 0..{layers - 1}")
    no_rope = _index_list(fields, "no_rope_layers")
    if not no_rope:  # HF: an empty or missing list takes the default pattern
        interval = fields.count("no_rope_layer_interval")
        no_rope = [int((i + 1) % interval != 0) for i in range(layers)]
    elif len(no_rope) != layers:
        fields.refuse("no_rope_layers", no_rope, f"one entry per layer ({layers})")
    return layers - len(set(moe_layers)), sum(1 for flag in no_rope if not flag)


def read(fields) -> Read:
    experts, top_k = expert_counts(fields, "num_local_experts")
    no_attention_dropout(fields, 'Llama 4')
    dense, nope = layer_kinds(fields)
    tuning = fields.value("attn_temperature_tuning")  # HF tests its truth (Scout's file gives 4)
    if tuning is not None and not isinstance(tuning, (bool, int, float)):
        fields.refuse("attn_temperature_tuning", tuning, "attn_temperature_tuning true/false (or a number)")
    temperature = bool(tuning) and nope > 0
    bias = fields.flag("attention_bias")
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, activation=fields.activation(),
                    qk_norm="l2" if fields.flag("use_qk_norm") and nope < fields.layers else "none",
                    moe="llama4", shared=True, dense_layers=dense > 0, nope_layers=nope > 0,
                    attn_temperature=temperature, softmax_bf16=True)
    expert_ffn = fields.count("intermediate_size")
    dims = {"f_s": expert_ffn}
    if dense:
        dims["L_d"] = dense
    if nope:
        dims["L_n"] = nope
    notes = []
    if dense:
        notes.append(f"{dense} of the {fields.layers} layers have a dense MLP (width "
                     f"{fields.count('intermediate_size_mlp')}) instead of the MoE: parameters, FLOPs and "
                     "activations over the whole model are exact; a layer's terms are the layers' average, so under "
                     "pipeline parallelism (pp > 1) the stage holding the dense layers is not itemised apart")
    if nope:
        notes.append(f"{nope} of the {fields.layers} layers have no rotary positions (NoPE"
                     + (", with temperature tuning" if temperature else "") + ", no qk-norm): over the whole model "
                     "exact; a layer's terms are the layers' average")
    notes.append("the routed experts are counted as HF's Llama4TextMoe runs them: every token through every one of "
                 f"the {experts} experts (its input scaled by a score that is 0 off its top {top_k}), so their FLOPs "
                 f"and saved tensors are E/k = {experts / top_k:g} times a top-k dispatch's; a kernel that dispatches only the "
                 "top-k tokens (Megatron-Core's) is not what this bill counts")
    chunk = fields.value("attention_chunk_size")
    if chunk is not None and nope < fields.layers:
        chunk = fields.count("attention_chunk_size")
        notes.append(f"chunked attention (attention_chunk_size {chunk}) on the RoPE layers is applied by HF as a "
                     f"mask: exact for s < {chunk}; from s = {chunk} on, HF's SDPA path copies K and V to a heads "
                     "and keeps a (b, 1, s, s) bf16 mask on each RoPE layer, 4·s·b·(a − g)·d_h + 2·b·s² bytes per "
                     "such layer the bill does not count (eager attention is exact at any s)")
    return Read(recipe, ffn=fields.count("intermediate_size_mlp"), kv_heads=fields.count("num_key_value_heads",
                                                                                          fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=fields.count("head_dim"), dims=dims,
                moe=(experts, top_k, expert_ffn, 1), notes=tuple(notes))
