"""SmolLM3 (HF ``model_type`` smollm3), as ``modeling_smollm3.py`` of transformers 5.24.0 builds it.

SmolLM3DecoderLayer (:280-321): Llama's — pre-RMSNorm, sequential; SmolLM3Attention (:165-240): GQA
with ``attention_bias`` on Q, K, V and O (:179-190), heads of ``head_dim`` when the file gives one
(``getattr``, :173), else h/a; layer i applies RoPE only when ``no_rope_layers[i]`` is truthy (:192,
:215-217; configuration_smollm3.py:100-103 fills it as ``(i + 1) % no_rope_layer_interval != 0``:
every 4th layer NoPE by default); SmolLM3MLP (:264-277): gated (gate, up, down) with ``mlp_bias``.

A NoPE layer is the RoPE layer without ``apply_rotary_pos_emb``, whose multiplies by cos and sin keep
only the model's cos and sin (computed once per forward, shared by every layer) and count no matmul:
its saved tensors and FLOPs are a RoPE layer's (traced, both kinds), so the L_n share llama4 needs is
not needed here — the NoPE layers are stated, not itemised apart. ``use_sliding_window`` (false by
default; configuration_smollm3.py:105-112 makes only NoPE layers sliding) is stated as every family's
window is (:func:`symbolic.models.hf._window_notes`).
"""
from ..config import Recipe
from .base import Read, attention_dropout_note, dropout_rate, source

MODEL_TYPE = "smollm3"
TITLE = "SmolLM3"
SOURCE = source(MODEL_TYPE)

#: configuration_smollm3.py's SmolLM3Config defaults of the fields read (:71-94)
DEFAULTS = {"intermediate_size": 11008, "max_position_embeddings": 32768, "num_key_value_heads": 4,
            "hidden_act": "silu", "tie_word_embeddings": True, "attention_bias": False, "mlp_bias": False,
            "attention_dropout": 0.0, "no_rope_layers": None, "no_rope_layer_interval": 4,
            "use_sliding_window": False, "sliding_window": None}


def nope_layers(fields) -> int:
    """The layers without RoPE, as SmolLM3Config.__post_init__ fills ``no_rope_layers`` (a list with at
    least one entry per layer; layer i reads entry i)."""
    flags = fields.value("no_rope_layers")
    if flags is None:
        interval = fields.count("no_rope_layer_interval")
        return sum(1 for i in range(fields.layers) if (i + 1) % interval == 0)
    if not isinstance(flags, list) or len(flags) < fields.layers or not all(
            isinstance(x, (int, bool)) for x in flags):
        fields.refuse("no_rope_layers", flags, f"no_rope_layers as a list of 0/1 flags, one per layer "
                      f"({fields.layers})")
    return sum(1 for flag in flags[:fields.layers] if not flag)


def read(fields) -> Read:
    bias = fields.flag("attention_bias")
    rate = dropout_rate(fields, "attention_dropout")
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, activation=fields.activation(),
                    mlp_bias=fields.flag("mlp_bias"), attention_dropout=rate > 0)
    kv_heads = fields.count("num_key_value_heads", fields.heads)
    head_dim = fields.count("head_dim")
    seq = fields.count("max_position_embeddings")
    notes = []
    nope = nope_layers(fields)
    if nope:
        notes.append(f"{nope} of the {fields.layers} layers have no rotary positions (NoPE, no_rope_layers): HF "
                     "skips the rotary multiplies there, which keep only the model's shared cos and sin and are no "
                     "matmul, so such a layer keeps and multiplies what a RoPE layer does (traced): exact per layer")
    notes += attention_dropout_note(recipe, rate, fields, kv_heads, head_dim, seq)
    return Read(recipe, ffn=fields.count("intermediate_size"), kv_heads=kv_heads, seq=seq, head_dim=head_dim,
                notes=tuple(notes))
