"""Granite-4.0-H (HF ``model_type`` granitemoehybrid), as ``modeling_granitemoehybrid.py`` of transformers
5.24.0 builds it.

GraniteMoeHybridDecoderLayer (:943-1010): pre-RMSNorm; layer i runs a Mamba2 mixer
(GraniteMoeHybridMambaLayer) when ``layer_types[i]`` is "mamba" (transformers' configuration_utils
remaps it to "linear_attention"; the default: every layer), else the attention
(GraniteMoeHybridAttention: Llama's GQA, ``attention_bias``, scaling ``attention_multiplier``,
rotary only when ``position_embedding_type`` is "rope", else none); its output × ``residual_multiplier``
added to the residual. Then a second RMSNorm, GraniteMoe's router and experts (top-k of the fp32
logits, softmax over k; ``num_local_experts`` 0: none) plus the shared MLP every token goes through
(GraniteMoeHybridMLP: one h → 2·``shared_intermediate_size`` input_linear, chunked into gate and up,
silu(gate)·up, output_linear), × ``residual_multiplier``. The mixer: in_proj h → 2·I + 2·g_m·d_s + n_m
with I = ``mamba_expand``·h (``mamba_proj_bias``, also on out_proj), the depthwise causal conv1d
(``mamba_conv_bias``), the chunked scan, the gated RMSNorm RMSNorm(y·silu(z)) in fp32 (its cast back is
to y's dtype, fp32: GraniteMoeHybridRMSNormGated), out_proj. The Mamba layers are a share L_s/L of the layer's
terms and the attention layers (L − L_s)/L: totals over the model exact, a layer's terms the layers'
average.
"""
from ..config import Recipe, default_seq
from .base import Read, multiplier_note, source
from .falcon_h1 import chunk_note, kernel_note, mamba_checks, mamba_letters

MODEL_TYPE = "granitemoehybrid"
TITLE = "Granite-4.0-H (GraniteMoeHybrid)"
SOURCE = source(MODEL_TYPE)
EXPERTS = "num_local_experts"  #: the experts count's field
MULTIPLIERS = ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling")
#: layer_types' names of a Mamba layer and of an attention layer (configuration_utils' legacy names first)
MAMBA, ATTENTION = ("mamba", "linear_attention"), ("attention", "full_attention")

#: configuration_granitemoehybrid.py's GraniteMoeHybridConfig defaults of the fields read
DEFAULTS = {"intermediate_size": 11008, "max_position_embeddings": 2048, "num_key_value_heads": None,
            "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "attention_dropout": 0.0,
            "embedding_multiplier": 1.0, "logits_scaling": 1.0, "residual_multiplier": 1.0,
            "attention_multiplier": 1.0, "num_local_experts": 8, "num_experts_per_tok": 2,
            "shared_intermediate_size": 1024, "position_embedding_type": None, "layer_types": None,
            "mamba_n_heads": 128, "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_head": "auto",
            "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 256, "mamba_conv_bias": True,
            "mamba_proj_bias": False, "time_step_limit": (0.0, float("inf"))}


def mamba_layers(fields) -> int:
    """L_s: the layers ``layer_types`` makes Mamba layers (default: all of them, as the config's
    ``__post_init__`` fills it in)."""
    kinds = fields.value("layer_types")
    if kinds is None:
        return fields.layers
    if not isinstance(kinds, list) or len(kinds) != fields.layers or any(k not in MAMBA + ATTENTION for k in kinds):
        fields.refuse("layer_types", kinds, f"layer_types as a list of {fields.layers} entries, each \"mamba\" or "
                      "\"attention\" (\"linear_attention\" / \"full_attention\")")
    return sum(1 for kind in kinds if kind in MAMBA)


def read(fields) -> Read:
    act = mamba_checks(fields, "Granite-4.0-H")
    expand = fields.value("mamba_expand")
    if isinstance(expand, bool) or not isinstance(expand, int) or expand <= 0:
        fields.refuse("mamba_expand", expand, "mamba_expand a positive integer")
    dims = mamba_letters(fields, expand * fields.hidden)
    mamba = mamba_layers(fields)
    dims["L_s"] = mamba
    experts = fields.value("num_local_experts")
    if isinstance(experts, bool) or not isinstance(experts, int) or experts < 0:
        fields.refuse("num_local_experts", experts, "num_local_experts a count (0: no experts, the shared MLP only)")
    shared = fields.count("shared_intermediate_size")
    bias = fields.flag("attention_bias")
    position = fields.value("position_embedding_type")
    mixer = dict(mamba="layers", mamba_gate="gate_norm", mamba_in_bias=fields.flag("mamba_proj_bias"),
                 mamba_conv_bias=fields.flag("mamba_conv_bias"), mamba_out_bias=fields.flag("mamba_proj_bias"))
    seq = fields.count("max_position_embeddings")
    notes = list(multiplier_note(fields, MULTIPLIERS))
    attention = fields.layers - mamba
    notes.append(f"{mamba} Mamba2 + {attention} attention layers"
                 + (f" (attention without rotary positions: position_embedding_type {position!r})"
                    if attention and position != "rope" else "")
                 + ": parameters, FLOPs and activations over the whole model are exact; a layer's terms are the "
                 "layers' average, so under pipeline parallelism (pp > 1) a stage is not itemised by its own mix")
    if mamba:
        notes += [chunk_note(dims, default_seq(seq)), kernel_note(Recipe(MODEL_TYPE, **mixer), dims, default_seq(seq))]
    common = dict(kv_heads=fields.count("num_key_value_heads", fields.heads), seq=seq,
                  head_dim=fields.count("head_dim"))
    if experts:
        top_k = fields.count("num_experts_per_tok")
        if top_k > experts:
            fields.refuse("num_experts_per_tok", top_k, f"at most num_local_experts ({experts}) experts per token")
        recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, activation=act, moe="granitemoe", shared=True,
                        **mixer)
        expert_ffn = fields.count("intermediate_size")
        return Read(recipe, ffn=expert_ffn, dims={**dims, "f_s": shared}, moe=(experts, top_k, expert_ffn, 1),
                    notes=tuple(notes), **common)
    # no experts: the shared MLP alone, one fused gate|up linear (GraniteMoeHybridMLP.input_linear)
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, activation=act, fused_gate_up=True, **mixer)
    return Read(recipe, ffn=shared, dims=dims, notes=tuple(notes), **common)
