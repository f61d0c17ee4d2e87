"""The GPT (Megatron) transformer layer, as Korthikanti et al. 2022 count it.

Korthikanti, Casper, Lym, McAfee, Andersch, Shoeybi, Catanzaro, "Reducing
Activation Recomputation in Large Transformer Models", arXiv 2205.05198, §4.1
(saved activations), and Narayanan et al. 2021, arXiv 2104.04473, §5.1
(parameters and FLOPs), for a layer with:

- pre-LayerNorm, multi-head attention with ``a`` heads of width ``h/a``;
- an MLP ``h -> f -> h`` with GeLU (GPT: ``f = 4h``);
- dropout after the attention softmax and on both block outputs;
- 2-byte (bf16/fp16) activations and 1-byte dropout masks; no FlashAttention.

The coefficients 34 = 10 + 24 and 5 of the papers are *not* written here: they
come out of summing the shapes below (see ``ledgers.activations``).
"""
from __future__ import annotations

from dataclasses import replace

from sympy import Expr

from ...core.dims import V, a, b, h, s
from ...core.tensors import Axis, Group, Inventory, Matmul, Parameter, SavedTensor

KORTHIKANTI = "Korthikanti et al. 2022 §4.1"
NARAYANAN = "Narayanan et al. 2021 §5.1"
MEGATRON_PARAMS = "Narayanan et al. 2021 §5.1 (Eq 2)"

GPT_FFN = 4 * h  #: the GPT MLP's inner width, h -> 4h -> h


def _hidden(name, dtype, group=Group.BODY, note=""):
    """An (s, b, h) tensor replicated under TP; sequence parallelism splits s."""
    return SavedTensor(name, (s, b, h), dtype, Axis.SEQUENCE, 0, group, KORTHIKANTI, note)


def _per_head(name, note=""):
    """An (s, b, a, h/a) tensor of the attention; TP splits the heads."""
    return SavedTensor(name, (s, b, a, h / a), "bf16", Axis.TENSOR, 2, Group.BODY, KORTHIKANTI, note)


def _scores(name, dtype, note=""):
    """A (b, a, s, s) attention-score tensor; TP splits the heads, not s."""
    return SavedTensor(name, (b, a, s, s), dtype, Axis.TENSOR, 1, Group.ATTENTION_CORE, KORTHIKANTI, note)


def _ffn(name, ffn: Expr, note=""):
    """An (s, b, f) MLP intermediate; TP splits the FFN width."""
    return SavedTensor(name, (s, b, ffn), "bf16", Axis.TENSOR, 2, Group.BODY, KORTHIKANTI, note)


def saved_tensors(ffn: Expr = GPT_FFN, activation: str = "gelu") -> Inventory:
    """Every tensor one GPT layer saves for backward (Korthikanti §4.1).

    Attention block: 11sbh + 5as²b bytes; MLP block: 19sbh bytes (f = 4h).
    ``activation``: ``gelu``, the fused GeLU the papers count (it keeps its
    input); ``gelu_new`` or ``gelu_fast``, HF's element-wise tanh chains,
    which keep 3 or 6 more (s, b, f) tensors (:data:`parts.CHAINS`; GPT-2's
    default ``gelu_new``: 24sbh more at f = 4h).
    """
    from .parts import activation_chain

    chain = tuple(replace(term, split=Axis.TENSOR, source=term.source) for term in activation_chain(activation, ffn))
    return Inventory((
        _hidden("attention/layernorm_input", "bf16", Group.LAYER_INPUT,
                "the layer input; LayerNorm needs it for its backward"),
        _hidden("attention/qkv_input", "bf16", note="LayerNorm output, the shared input of the Q, K, V projections"),
        _per_head("attention/query", "Q, kept for the Q·Kᵀ backward"),
        _per_head("attention/key", "K, kept for the Q·Kᵀ backward"),
        _scores("attention/softmax_output", "bf16", "softmax(Q·Kᵀ), kept for the softmax backward"),
        _scores("attention/softmax_dropout_mask", "mask", "dropout mask on the attention probabilities"),
        _scores("attention/softmax_dropout_output", "bf16", "dropped-out probabilities, kept for the ·V backward"),
        _per_head("attention/value", "V, kept for the ·V backward"),
        _per_head("attention/projection_input", "attention context, the output projection's input"),
        _hidden("attention/dropout_mask", "mask", note="dropout mask on the attention block's output"),
        _hidden("mlp/layernorm_input", "bf16", note="the MLP block's LayerNorm input"),
        _hidden("mlp/fc1_input", "bf16", note="LayerNorm output, the first linear's input"),
        _ffn("mlp/gelu_input", ffn, "first linear's output, GeLU's input"),
        *chain,
        _ffn("mlp/fc2_input", ffn, "GeLU output, the second linear's input"),
        _hidden("mlp/dropout_mask", "mask", note="dropout mask on the MLP block's output"),
    ))


def parameters(ffn: Expr = GPT_FFN, tied: bool = True, positions: str = "learned", table: Expr = s) -> Inventory:
    """The parameters of a GPT model (Narayanan et al. 2021 §5.1, Eq 2).

    ``tied``: the output layer reuses the word embedding (Eq 2 counts Vh once);
    untied adds an output projection of V·h. ``positions``: ``learned`` adds a
    position table of ``table`` rows — s, the training sequence, as Eq 2
    counts it, or P, the rows a model was built with (GPT-2's n_positions);
    ``rope`` has none. The final LayerNorm (2h) is listed
    on its own: Eq 2 leaves it out.
    """
    if positions not in ("learned", "rope"):
        raise ValueError(f"positions must be 'learned' or 'rope', not {positions!r}")
    layer = [
        Parameter("layer/attention/layernorm_weight", (h,), "layer", MEGATRON_PARAMS),
        Parameter("layer/attention/layernorm_bias", (h,), "layer", MEGATRON_PARAMS),
        Parameter("layer/attention/qkv_weight", (h, 3 * h), "layer", MEGATRON_PARAMS, "Q, K, V: three h×h"),
        Parameter("layer/attention/qkv_bias", (3 * h,), "layer", MEGATRON_PARAMS),
        Parameter("layer/attention/projection_weight", (h, h), "layer", MEGATRON_PARAMS, "O: h×h"),
        Parameter("layer/attention/projection_bias", (h,), "layer", MEGATRON_PARAMS),
        Parameter("layer/mlp/layernorm_weight", (h,), "layer", MEGATRON_PARAMS),
        Parameter("layer/mlp/layernorm_bias", (h,), "layer", MEGATRON_PARAMS),
        Parameter("layer/mlp/fc1_weight", (h, ffn), "layer", MEGATRON_PARAMS),
        Parameter("layer/mlp/fc1_bias", (ffn,), "layer", MEGATRON_PARAMS),
        Parameter("layer/mlp/fc2_weight", (ffn, h), "layer", MEGATRON_PARAMS),
        Parameter("layer/mlp/fc2_bias", (h,), "layer", MEGATRON_PARAMS),
    ]
    embedding = [Parameter("embedding/word", (V, h), "embedding", MEGATRON_PARAMS,
                           "tied: also the output layer" if tied else "")]
    if positions == "learned":
        embedding.append(Parameter("embedding/position", (table, h), "embedding", MEGATRON_PARAMS,
                                   f"learned positions, one row per position up to {table}"))
    output = [Parameter("output/final_layernorm_weight", (h,), "output", "GPT-2/Megatron final LayerNorm",
                        "not in Eq 2"),
              Parameter("output/final_layernorm_bias", (h,), "output", "GPT-2/Megatron final LayerNorm",
                        "not in Eq 2")]
    if not tied:
        output.append(Parameter("output/projection_weight", (h, V), "output", "seed 001 §2 (untied)",
                                "untied output layer: another V·h"))
    return Inventory(tuple(layer + embedding + output))


def matmuls(ffn: Expr = GPT_FFN) -> Inventory:
    """The matmuls of one layer's forward and of the logits (Narayanan §5.1).

    Per layer: QKV 6bsh², Q·Kᵀ 2bs²h, scores·V 2bs²h, projection 2bsh²,
    MLP 2·2bsh·f. The attention products are counted over the full s×s matrix,
    as Narayanan and Korthikanti do (no causal-mask saving).
    """
    tokens = b * s
    return Inventory((
        Matmul("layer/attention/qkv", 1, tokens, h, 3 * h, True, "layer", NARAYANAN),
        Matmul("layer/attention/scores", b * a, s, h / a, s, False, "layer", NARAYANAN, "Q·Kᵀ per head",
               Group.ATTENTION_CORE),
        Matmul("layer/attention/context", b * a, s, s, h / a, False, "layer", NARAYANAN, "probabilities·V per head",
               Group.ATTENTION_CORE),
        Matmul("layer/attention/projection", 1, tokens, h, h, True, "layer", NARAYANAN),
        Matmul("layer/mlp/fc1", 1, tokens, h, ffn, True, "layer", NARAYANAN),
        Matmul("layer/mlp/fc2", 1, tokens, ffn, h, True, "layer", NARAYANAN),
        Matmul("output/logits", 1, tokens, h, V, True, "output", NARAYANAN, "hidden states × word embeddingᵀ"),
    ))
