"""LFM2 (HF ``model_type`` lfm2: Liquid AI's LFM2-350M/700M/1.2B/2.6B), as ``modeling_lfm2.py`` and
``configuration_lfm2.py`` of transformers 5.24.0 build it.

Lfm2DecoderLayer (modeling_lfm2.py:386-429): x + mixer(operator_norm(x)), then h + MLP(ffn_norm(h)), both
norms Llama's eager RMSNorm (Lfm2RMSNorm, :44-59). Its mixer differs by layer: ``layer_types[i] == "conv"``
(L_c of them) is Lfm2ShortConv (:316-383, :func:`~symbolic.models.architectures.mixers.short_conv`), any
other kind Lfm2Attention (:201-258): GQA without biases, an RMSNorm over each head of Q and K before RoPE
(``q_layernorm``, ``k_layernorm``), heads of ``head_dim`` when the config has one, else h/a. Lfm2MLP
(:111-128): SwiGLU, w2(silu(w1(x))·w3(x)), its width ``intermediate_size`` adjusted when
``block_auto_adjust_ff_dim``: int(2f/3), then × ``block_ffn_dim_multiplier`` and rounded up to
``block_multiple_of``. The kinds are shares of the layer's terms ((L − L_c)/L, L_c/L): totals over the
model exact, a layer's terms the layers' average. The final norm is ``embedding_norm``; the output layer is
tied to the embedding by default.
"""
from ..config import Recipe
from .base import Read, source

MODEL_TYPE = "lfm2"
TITLE = "LFM2"
SOURCE = source(MODEL_TYPE)

#: configuration_lfm2.py's Lfm2Config defaults of the fields read
DEFAULTS = {"intermediate_size": 12288, "max_position_embeddings": 128_000, "num_key_value_heads": 8,
            "tie_word_embeddings": True, "conv_bias": False, "conv_L_cache": 3, "block_multiple_of": 256,
            "block_ffn_dim_multiplier": 1.0, "block_auto_adjust_ff_dim": True, "full_attn_idxs": None,
            "layer_types": None}

#: the layer kinds Lfm2Model's mask mapping knows (modeling_lfm2.py:504-507): another kind fails in HF
KINDS = ("conv", "full_attention")


def layer_types(fields) -> list[str]:
    """One kind per layer, as Lfm2Config.__post_init__ fills them in: ``layer_types``, else "full_attention"
    at the indices of ``full_attn_idxs`` (every layer when it is null) and "conv" elsewhere."""
    types = fields.value("layer_types")
    if types is None:
        indices = fields.value("full_attn_idxs")
        if indices is not None and (not isinstance(indices, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in indices)):
            fields.refuse("full_attn_idxs", indices, "full_attn_idxs as a list of layer indices (or null)")
        types = ["full_attention" if indices is None or i in indices else "conv" for i in range(fields.layers)]
    unknown = sorted(set(types) - set(KINDS))
    if unknown:
        fields.refuse("layer_types", unknown, "LFM2's layer kinds conv and full_attention (Lfm2Model maps no other)")
    return types


def ffn_width(fields) -> int:
    """Lfm2MLP's width (modeling_lfm2.py:114-122), from ``intermediate_size`` (``block_ff_dim``, which
    Lfm2Config.__post_init__ moves into it, when the file gives it)."""
    width = fields.count("block_ff_dim") or fields.count("intermediate_size")
    if fields.flag("block_auto_adjust_ff_dim"):
        width = int(2 * width / 3)
        multiplier = fields.value("block_ffn_dim_multiplier")
        if multiplier is not None:
            if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) or multiplier <= 0:
                fields.refuse("block_ffn_dim_multiplier", multiplier, "a positive number (or null)")
            multiple = fields.count("block_multiple_of")
            width = int(multiplier * width)
            width = multiple * ((width + multiple - 1) // multiple)
    if width <= 0:
        fields.refuse("intermediate_size", fields.value("intermediate_size"), "an MLP width that stays positive "
                      "after block_auto_adjust_ff_dim's 2/3")
    return width


def tied(fields) -> bool:
    """``tie_embedding`` (LFM2's own files' spelling, which Lfm2Config.__post_init__ moves into
    tie_word_embeddings), else ``tie_word_embeddings``."""
    value = fields.raw.get("tie_embedding")
    if value is None:
        return fields.flag("tie_word_embeddings")
    if not isinstance(value, bool):
        fields.refuse("tie_embedding", value, "tie_embedding true or false")
    return value


def read(fields) -> Read:
    kinds = layer_types(fields)
    conv_layers = kinds.count("conv")
    recipe = Recipe(MODEL_TYPE, qk_norm="head", short_conv=conv_layers > 0, conv_bias=fields.flag("conv_bias"))
    dims = {}
    notes = []
    if conv_layers:
        kernel = fields.count("conv_L_cache")
        dims.update(L_c=conv_layers, K_c=kernel)
        notes.append(f"{conv_layers} of the {fields.layers} layers are short convolutions (conv), the others "
                     "attention: parameters, FLOPs and activations over the whole model are exact; a layer's terms "
                     "are the layers' average, so under pipeline parallelism (pp > 1) a stage's own mix of conv and "
                     "attention layers is not itemised apart")
        notes.append("the short convolution is billed as the causal-conv1d kernel runs it on GPU (HF's "
                     "Lfm2ShortConv calls causal_conv1d_fn when the package is installed; its CausalConv1dFn saves "
                     "its input and weight, causal-conv1d 0d2252d causal_conv1d_interface.py): an output of s "
                     "positions kept by C·conv. HF's torch path (CPU, or without the package) keeps F.conv1d's "
                     "padded output, 2·b·h·(K_c − 1) bytes more per conv layer "
                     f"({2 * fields.hidden * (kernel - 1):,} B per sequence), traced; its FLOPs, counted over the "
                     "s + K_c − 1 padded positions as torch computes them, are 6·b·h·K_c·(K_c − 1) per conv layer "
                     "more than the kernel's")
    return Read(recipe, ffn=ffn_width(fields), kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=fields.count("head_dim"), dims=dims,
                notes=tuple(notes), tied=tied(fields))
