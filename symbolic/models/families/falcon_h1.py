"""Falcon-H1 (HF ``model_type`` falcon_h1), as ``modeling_falcon_h1.py`` of transformers 5.24.0 builds it.

FalconH1DecoderLayer (:867-948): pre-RMSNorm; the norm's output goes to a Mamba2 mixer
(FalconH1Mixer, ×``ssm_in_multiplier`` first) and to the attention (×``attention_in_multiplier``)
in parallel, their outputs (×``ssm_out_multiplier``, ×``attention_out_multiplier``) summed and added
to the residual; then a second RMSNorm and a SwiGLU MLP (gate ×``mlp_multipliers[0]``, down
×``mlp_multipliers[1]``). FalconH1Attention: Llama's GQA with ``head_dim``, K ×``key_multiplier``,
full rotary, ``attention_bias`` on Q, K, V, O. The mixer: in_proj h → 2·d_ssm + 2·g_m·d_s + n_m
(``mamba_proj_bias``), its output × the µP vector (a buffer built from ``ssm_multipliers``), the
depthwise causal conv1d (``mamba_conv_bias``), the chunked scan, y·silu(z) or the gated RMSNorm
(``mamba_rms_norm``, ``mamba_norm_before_gate``), out_proj (``projectors_bias``).
"""
from ..config import Recipe
from .base import Read, multiplier_note, no_attention_dropout, source

MODEL_TYPE = "falcon_h1"
TITLE = "Falcon-H1"
SOURCE = source(MODEL_TYPE)

#: the scalar multipliers (µP) FalconH1 applies; ``mlp_multipliers`` and ``ssm_multipliers`` are lists of them
MULTIPLIERS = ("embedding_multiplier", "lm_head_multiplier", "key_multiplier", "attention_in_multiplier",
               "attention_out_multiplier", "ssm_in_multiplier", "ssm_out_multiplier")

#: configuration_falcon_h1.py's FalconH1Config defaults of the fields read
DEFAULTS = {"intermediate_size": 14336, "max_position_embeddings": 8192, "num_key_value_heads": 8,
            "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
            "attention_dropout": 0.0, "mamba_d_ssm": 1024, "mamba_n_heads": 128, "mamba_d_head": "auto",
            "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2,
            "mamba_chunk_size": 256, "mamba_conv_bias": True, "mamba_proj_bias": False,
            "mamba_norm_before_gate": True, "mamba_rms_norm": False, "projectors_bias": False,
            "time_step_limit": (0.0, float("inf")), "lm_head_multiplier": 1.0, "embedding_multiplier": 1.0,
            "mlp_multipliers": None, "key_multiplier": 1.0, "attention_out_multiplier": 1.0,
            "attention_in_multiplier": 1.0, "ssm_multipliers": None, "ssm_in_multiplier": 1.0,
            "ssm_out_multiplier": 1.0}


def _number_list(fields, name: str, length: int) -> list:
    value = fields.value(name)
    if value is None:
        return [1.0] * length  # FalconH1Config.__post_init__'s default
    if not isinstance(value, (list, tuple)) or len(value) != length or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
        fields.refuse(name, value, f"{name} as a list of {length} numbers")
    return list(value)


def mamba_checks(fields, title: str) -> str:
    """What every Mamba2 hybrid's reader refuses in one line (Falcon-H1, Bamba, Granite-4.0-H): attention
    dropout (no mask modelled), a conv activation other than SiLU (its saved input is silu's), and a
    ``time_step_limit`` that is not the (min, max) pair HF clamps dt to on every call. Returns the activation."""
    no_attention_dropout(fields, title)
    act = fields.activation()
    if act != "silu":  # the mixer's conv1d activation is hidden_act too; its saved input is silu's
        fields.refuse("hidden_act", act, "hidden_act silu (the Mamba2 mixer's conv activation is modelled as silu)")
    limit = fields.value("time_step_limit")
    if not isinstance(limit, (list, tuple)) or len(limit) != 2:  # HF clamps dt to it on every call
        fields.refuse("time_step_limit", limit, "time_step_limit as a pair (min, max)")
    return act


def mamba_letters(fields, inner: int, heads_field: str = "mamba_n_heads", head_field: str = "mamba_d_head",
                  groups_field: str = "mamba_n_groups", state_field: str = "mamba_d_state",
                  conv_field: str = "mamba_d_conv", chunk_field: str = "mamba_chunk_size") -> dict:
    """The Mamba2 mixer's letters from a config (n_m, d_m, d_s, g_m, p_c, Q), the inner width
    ``inner`` = n_m·d_m checked as the config's ``validate_architecture`` does."""
    heads = fields.count(heads_field)
    head = fields.value(head_field)
    if head == "auto":  # FalconH1Config.__post_init__: the inner width over the heads
        head = inner // heads
    if not isinstance(head, int) or isinstance(head, bool) or head <= 0:
        fields.refuse(head_field, head, f"{head_field} a positive integer (or \"auto\")")
    if head * heads != inner:
        fields.refuse(head_field, head, f"{head_field} × {heads_field} ({heads}) equal to the mixer's inner width "
                      f"({inner}), as the config's validate_architecture requires")
    conv = fields.count(conv_field)
    if conv < 2:
        fields.refuse(conv_field, conv, "mamba_d_conv at least 2 (a causal conv over past tokens)")
    groups = fields.count(groups_field)
    if heads % groups:
        fields.refuse(groups_field, groups, f"{groups_field} dividing {heads_field} ({heads})")
    return {"n_m": heads, "d_m": head, "d_s": fields.count(state_field), "g_m": groups,
            "p_c": conv - 1, "Q": fields.count(chunk_field)}


def chunk_note(dims: dict, seq: int) -> str:
    """The scan's condition (s a multiple of Q ≥ 2, at least two chunks), stated with the default s."""
    chunk = dims["Q"]
    holds = seq % chunk == 0 and seq >= 2 * chunk and chunk >= 2
    return (f"the Mamba2 scan runs in chunks of mamba_chunk_size Q = {chunk} tokens: exact when s is a multiple of "
            f"{chunk} with at least two chunks (s ≥ {2 * chunk}; the default s = {seq} is "
            + ("one" if holds else "not one") + "); otherwise HF pads the scan to ⌈s/Q⌉·Q tokens and its "
            "chunk-shaped terms are the padded length's, which the bill does not follow, and with one chunk "
            "(s = Q) an einsum operand is a view, not a copy: 4·b·n_m·d_m·(s − d_s) bytes fewer per Mamba layer "
            "than billed (traced)" + ("" if chunk >= 2 else "; mamba_chunk_size 1 runs other kernels, not modelled"))


def kernel_note(recipe: Recipe, dims: dict, seq: int) -> str:
    """What the bill counts of a Mamba2 mixer on a GPU (the fused CUDA kernel's tensors) against the torch path
    the tests trace on CPU, and the unfused kernels HF takes when a cache is passed, each with its size."""
    from sympy import Add

    from ...core.dims import SYMBOLS
    from ..architectures import mixers

    def total(kernel):
        mixer = mixers.mamba2_mixer(recipe.mamba_gate, kernel=kernel)
        return Add(*(term.bytes for term in mixer.saved))

    values = {SYMBOLS[k]: v for k, v in dims.items() if k in SYMBOLS} | {SYMBOLS["s"]: seq, SYMBOLS["b"]: 1}
    gap = int((total("torch") - total("fused")).subs(values))
    channels = dims["n_m"] * dims["d_m"] + 2 * dims["g_m"] * dims["d_s"]
    unfused = 2 * seq * (channels + 2 * dims["n_m"] * dims["d_m"]) + 4 * seq * dims["n_m"]
    return ("a Mamba2 layer is billed on a GPU as mamba-ssm's fused kernel keeps it (MambaSplitConv1dScanCombinedFn, "
            "mamba-ssm e9594ce ssd_combined.py:888: in_proj's input and output, the scan's output, the norm's rstd; "
            "HF calls it in training when no cache is passed: use_cache false or gradient checkpointing); "
            f"transformers' torch path without the kernels (CPU, traced exactly) keeps {gap:,} bytes more per Mamba "
            f"layer at s = {seq}, b = 1 (the scan's fp32 intermediates); with use_cache true and no checkpointing HF "
            "passes a cache and runs the unfused kernels (causal-conv1d's CausalConv1dFn, mamba-ssm's "
            "MambaChunkScanCombinedFn, ssd_combined.py:606) and the gate in torch, which keep at least "
            f"2·s·b·(C + 2·n_m·d_m) + 4·s·b·n_m bytes more ({unfused:,} at s = {seq}, b = 1), not billed")


def read(fields) -> Read:
    act = mamba_checks(fields, "Falcon-H1")
    inner = fields.count("mamba_d_ssm")
    if inner is None:
        expand = fields.value("mamba_expand")
        if isinstance(expand, bool) or not isinstance(expand, (int, float)) or int(expand * fields.hidden) <= 0:
            fields.refuse("mamba_expand", expand, "mamba_expand a positive number (mamba_d_ssm null)")
        inner = int(expand * fields.hidden)
    dims = mamba_letters(fields, inner)
    if fields.flag("mamba_rms_norm"):
        gate = "norm_gate" if fields.flag("mamba_norm_before_gate") else "gate_norm"
    else:
        gate = "silu"
    bias = fields.flag("attention_bias")
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, mlp_bias=fields.flag("mlp_bias"), activation=act,
                    mamba="parallel", mamba_gate=gate, mamba_in_bias=fields.flag("mamba_proj_bias"),
                    mamba_conv_bias=fields.flag("mamba_conv_bias"), mamba_out_bias=fields.flag("projectors_bias"))
    seq = fields.count("max_position_embeddings")
    mlp, ssm = _number_list(fields, "mlp_multipliers", 2), _number_list(fields, "ssm_multipliers", 5)
    notes = list(multiplier_note(fields, MULTIPLIERS))
    notes.append(f"mlp_multipliers {mlp} (gate, down) are scalars too; ssm_multipliers {ssm} (z, x, B, C, dt) "
                 "are the µP vector FalconH1Model registers in every layer as a buffer of 2·d_ssm + 2·g_m·d_s + n_m "
                 f"= {2 * inner + 2 * dims['g_m'] * dims['d_s'] + dims['n_m']} elements (not a parameter): the "
                 "multiply of in_proj's output keeps only that buffer, no activation; the scaled copies of the "
                 "norm's output the mixer's in_proj and the attention read are each kept (counted)")
    from ..config import default_seq
    notes += [chunk_note(dims, default_seq(seq)), kernel_note(recipe, dims, default_seq(seq))]
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads), seq=seq,
                head_dim=fields.count("head_dim"), dims=dims, notes=tuple(notes))
