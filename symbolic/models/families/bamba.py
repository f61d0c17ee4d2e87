"""Bamba (HF ``model_type`` bamba), as ``modeling_bamba.py`` of transformers 5.24.0 builds it.

BambaDecoderLayer (:842-915): pre-RMSNorm; layer i runs the attention when i is in
``attn_layer_indices`` (BambaConfig.layers_block_type), else a Mamba2 mixer (BambaMixer: the
Granite-4.0-H mixer, in_proj h → 2·I + 2·g_m·d_s + n_m with I = ``mamba_expand``·h, the gated RMSNorm
RMSNorm(y·silu(z)) in fp32); then a second RMSNorm and a SwiGLU MLP (BambaMLP, ``mlp_bias``).
BambaAttention: Llama's GQA with ``attention_bias``, rotary on half of each head (BambaConfig
hard-codes ``partial_rotary_factor`` 0.5), Q and K rebuilt by ``torch.cat``. The Mamba layers are a
share L_s/L of the layer's terms and the attention layers (L − L_s)/L.
"""
from ..config import Recipe, default_seq
from .base import Read, source
from .falcon_h1 import chunk_note, kernel_note, mamba_checks, mamba_letters

MODEL_TYPE = "bamba"
TITLE = "Bamba"
SOURCE = source(MODEL_TYPE)

#: configuration_bamba.py's BambaConfig defaults of the fields read
DEFAULTS = {"intermediate_size": 14336, "max_position_embeddings": 262144, "num_key_value_heads": 8,
            "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
            "attention_dropout": 0.0, "attn_layer_indices": None, "mamba_n_heads": 128, "mamba_d_head": "auto",
            "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2,
            "mamba_chunk_size": 256, "mamba_conv_bias": True, "mamba_proj_bias": False,
            "time_step_limit": (0.0, float("inf"))}


def read(fields) -> Read:
    act = mamba_checks(fields, "Bamba")
    expand = fields.value("mamba_expand")
    if isinstance(expand, bool) or not isinstance(expand, int) or expand <= 0:
        fields.refuse("mamba_expand", expand, "mamba_expand a positive integer")
    dims = mamba_letters(fields, expand * fields.hidden)
    indices = fields.value("attn_layer_indices")
    if indices is not None and (not isinstance(indices, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in indices)):
        fields.refuse("attn_layer_indices", indices, "attn_layer_indices as a list of layer indices (or null)")
    attention = len({i for i in indices or () if 0 <= i < fields.layers})
    dims["L_s"] = fields.layers - attention
    if fields.value("head_dim") is not None and fields.count("head_dim") % 4:
        fields.refuse("head_dim", fields.value("head_dim"), "a head_dim divisible by 4 (half of it rotary)")
    bias = fields.flag("attention_bias")
    mixer = dict(mamba="layers", mamba_gate="gate_norm", mamba_in_bias=fields.flag("mamba_proj_bias"),
                 mamba_conv_bias=fields.flag("mamba_conv_bias"), mamba_out_bias=fields.flag("mamba_proj_bias"))
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, mlp_bias=fields.flag("mlp_bias"), activation=act,
                    rotary_cat=True, **mixer)
    seq = fields.count("max_position_embeddings")
    notes = [f"{dims['L_s']} Mamba2 + {attention} attention layers: parameters, FLOPs and activations over the whole "
             "model are exact; a layer's terms are the layers' average, so under pipeline parallelism (pp > 1) a "
             "stage is not itemised by its own mix"]
    if dims["L_s"]:
        notes += [chunk_note(dims, default_seq(seq)), kernel_note(Recipe(MODEL_TYPE, **mixer), dims, default_seq(seq))]
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads), seq=seq,
                head_dim=fields.count("head_dim"), dims=dims, notes=tuple(notes))
