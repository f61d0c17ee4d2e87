"""Nemotron-H (HF ``model_type`` nemotron_h), as ``modeling_nemotron_h.py`` of transformers 5.24.0 builds it,
without its MoE blocks.

NemotronHBlock (:934-993): each layer is one block, x + mixer(RMSNorm(x)) (NemotronHRMSNorm: x·rstd times
the weight's fp32 copy in fp32, cast back), its mixer by
``layers_block_type`` (a file's ``hybrid_override_pattern``: M Mamba, * attention, - MLP, E MoE): a Mamba2
mixer (NemotronHMamba2Mixer: Granite-4.0-H's, inner width ``mamba_num_heads``·``mamba_head_dim``, the
gated RMSNorm in fp32, ``use_bias`` on in_proj and out_proj, dt clamped below by ``time_step_min``), the
attention (NemotronHAttention: GQA of ``head_dim``, no rotary, no bias whatever ``attention_bias`` says) or
an MLP (NemotronHMLP: up, relu², down, ``mlp_bias``). The Mamba, attention and MLP blocks are shares L_s/L,
L_a/L and (L − L_s − L_a)/L of the layer's terms: totals over the model exact, a layer's terms their
average. MoE blocks (Nemotron-3: a latent projection, the grouped sigmoid router, relu² experts) are refused.
"""
from ..config import Recipe, default_seq
from .base import Read, no_attention_dropout, source
from .falcon_h1 import chunk_note, kernel_note, mamba_letters

MODEL_TYPE = "nemotron_h"
TITLE = "Nemotron-H"
SOURCE = source(MODEL_TYPE)
#: the experts count's field: read by the MoE blocks only (refused), so a file's count (transformers writes its
#: default, 8) is inert without them
EXPERTS = "n_routed_experts"

#: layers_block_type's names (and hybrid_override_pattern's letters) of each block kind
KINDS = {"linear_attention": "M", "mamba": "M", "full_attention": "*", "attention": "*", "mlp": "-", "moe": "E"}
PATTERN = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}

#: configuration_nemotron_h.py's NemotronHConfig defaults of the fields read
DEFAULTS = {"intermediate_size": 21504, "max_position_embeddings": 4096, "num_key_value_heads": 8, "head_dim": 128,
            "tie_word_embeddings": False, "attention_dropout": 0.0, "mlp_hidden_act": "relu2", "mlp_bias": False,
            "layers_block_type": None, "ssm_state_size": 128, "mamba_num_heads": 128, "mamba_head_dim": 64,
            "mamba_hidden_act": "silu", "n_groups": 8, "conv_kernel": 4, "chunk_size": 128, "use_conv_bias": True,
            "use_bias": False}

#: the older spellings NemotronHConfig.__post_init__ still reads (a published file's), by the field they set
OLD_NAMES = {"n_groups": "mamba_n_groups", "conv_kernel": "mamba_d_conv", "chunk_size": "mamba_chunk_size",
             "use_conv_bias": "mamba_conv_bias"}


def block_kinds(fields) -> list[str]:
    """One letter per layer (M, *, -, E), from ``layers_block_type`` (or ``layer_types``) or
    ``hybrid_override_pattern``, as NemotronHConfig reads them; the default (no list, no pattern) is its
    four-block pattern."""
    raw = fields.raw
    kinds = raw.get("layers_block_type") or raw.get("layer_types")
    if kinds is None and isinstance(raw.get("hybrid_override_pattern"), str):
        pattern = raw["hybrid_override_pattern"]
        if any(char not in PATTERN for char in pattern):
            fields.refuse("hybrid_override_pattern", pattern, "a pattern of M, *, - and E")
        kinds = [PATTERN[char] for char in pattern]
    if kinds is None:
        kinds = ["linear_attention", "moe", "full_attention", "mlp"]
    if not isinstance(kinds, list) or any(kind not in KINDS for kind in kinds):
        fields.refuse("layers_block_type", kinds, "a list of \"linear_attention\", \"full_attention\", \"mlp\" "
                      "and \"moe\"")
    if len(kinds) != fields.layers:
        fields.refuse("num_hidden_layers", fields.layers, f"num_hidden_layers equal to the blocks listed "
                      f"({len(kinds)}; transformers builds that many)")
    return [KINDS[kind] for kind in kinds]


def read(fields) -> Read:
    renamed = {name: fields.raw[old] for name, old in OLD_NAMES.items() if old in fields.raw}
    if renamed:  # a file's older spelling wins, as the config's __post_init__ has it
        fields = type(fields)({**fields.raw, **renamed}, fields.model_type, fields.where,
                              (fields.layers, fields.hidden, fields.heads, fields.vocab))
    no_attention_dropout(fields, 'Nemotron-H')
    if fields.value("mamba_hidden_act") not in ("silu", "swish"):
        fields.refuse("mamba_hidden_act", fields.value("mamba_hidden_act"), "mamba_hidden_act silu (the Mamba2 "
                      "mixer's conv activation is modelled as silu)")
    if fields.flag("tie_word_embeddings"):  # NemotronHForCausalLM._tied_weights_keys = {} (:1159): never tied
        fields.refuse("tie_word_embeddings", True, "tie_word_embeddings false (transformers 5.24.0 builds "
                      "NemotronHForCausalLM's lm_head untied whatever the flag says: _tied_weights_keys is empty)")
    kinds = block_kinds(fields)
    if "E" in kinds:
        fields.refuse("layers_block_type", "moe", "Nemotron-H without MoE blocks (its latent MoE with the grouped "
                      "sigmoid router and relu² experts is not modelled yet)")
    heads, head = fields.count("mamba_num_heads"), fields.count("mamba_head_dim")
    dims = mamba_letters(fields, heads * head, heads_field="mamba_num_heads", head_field="mamba_head_dim",
                         groups_field="n_groups", state_field="ssm_state_size", conv_field="conv_kernel",
                         chunk_field="chunk_size")
    dims.update(L_s=kinds.count("M"), L_a=kinds.count("*"))
    act = fields.activation("mlp_hidden_act", ("relu2", "silu", "gelu", "gelu_pytorch_tanh", "relu"))
    bias = fields.flag("use_bias")
    mixer = dict(mamba="blocks", mamba_gate="gate_norm", mamba_in_bias=bias,
                 mamba_conv_bias=fields.flag("use_conv_bias"), mamba_out_bias=bias)
    recipe = Recipe(MODEL_TYPE, norm="rmsnorm_fp32_weight", mlp="plain", activation=act,
                    mlp_bias=fields.flag("mlp_bias"), **mixer)
    seq = fields.count("max_position_embeddings")
    mlp = fields.layers - dims["L_s"] - dims["L_a"]
    notes = [f"{dims['L_s']} Mamba2 + {dims['L_a']} attention + {mlp} MLP blocks, one per layer (attention without "
             "rotary positions): parameters, FLOPs and activations over the whole model are exact; a layer's terms "
             "are the blocks' average, so under pipeline parallelism (pp > 1) a stage is not itemised by its own mix"]
    notes.append(f"the output side's final norm is counted as Llama's RMSNorm: NemotronHRMSNorm keeps x·rstd in fp32, "
                 f"2·s·b·h bytes more ({2 * fields.hidden:,} B per token), and the weight's fp32 copy, "
                 f"{4 * fields.hidden:,} B (the output side is reported beside the total, not in it)")
    if dims["L_s"]:
        notes += [chunk_note(dims, default_seq(seq)), kernel_note(Recipe(MODEL_TYPE, **mixer), dims, default_seq(seq))]
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads), seq=seq,
                head_dim=fields.count("head_dim"), dims=dims, notes=tuple(notes))
