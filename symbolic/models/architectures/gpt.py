"""The GPT (Megatron) transformer layer, as Korthikanti et al. 2022 count it: a recipe of parts.

Korthikanti, Casper, Lym, McAfee, Andersch, Shoeybi, Catanzaro, "Reducing
Activation Recomputation in Large Transformer Models", arXiv 2205.05198, §4.1
(saved activations), and Narayanan et al. 2021, arXiv 2104.04473, §5.1
(parameters and FLOPs), for a layer with:

- pre-LayerNorm, multi-head attention with ``a`` heads of width ``h/a``;
- an MLP ``h -> f -> h`` with GeLU (GPT: ``f = 4h``);
- dropout after the attention softmax and on both block outputs;
- 2-byte (bf16/fp16) activations and 1-byte dropout masks; no FlashAttention.

The layer is :data:`RECIPE` composed from the same parts as every other
family (:func:`composed.layer`: LayerNorm, fused Q|K|V with biases, the
``paper`` attention core with its s×s softmax and dropout, a plain GeLU MLP
with biases, dropout on each block's output) and named in the papers' words
(:data:`PAPER`). The paper's form is :func:`conventions.paper_form` of it:
LayerNorm's per-row statistics are a backend term the papers leave out.

The coefficients 34 = 10 + 24 and 5 of the papers are *not* written here: they
come out of summing the shapes the parts return (see ``ledgers.activations``).
"""
from __future__ import annotations

from dataclasses import replace

from sympy import Expr

from ...core.dims import P, a, f, h, s
from ...core.tensors import Inventory
from ..config import Recipe
from . import composed, parts
from .conventions import paper_form

KORTHIKANTI = "Korthikanti et al. 2022 §4.1"
NARAYANAN = "Narayanan et al. 2021 §5.1"
MEGATRON_PARAMS = "Narayanan et al. 2021 §5.1 (Eq 2)"
FINAL_LAYERNORM = "GPT-2/Megatron final LayerNorm"

GPT_FFN = 4 * h  #: the GPT MLP's inner width, h -> 4h -> h

#: The parts of the papers' GPT layer: pre-LayerNorm, one Q|K|V matrix and the output projection
#: with biases, multi-head attention (K and V at a heads), a plain GeLU MLP with biases.
RECIPE = Recipe("gpt", norm="layernorm", qkv_bias=True, o_bias=True, fused_qkv=True, mlp="plain",
                activation="gelu", mlp_bias=True)

#: The layer's attention kernel (Korthikanti §4.1: the softmax kept, dropout on the probabilities)
#: and its dropout on each block's output.
KERNEL, DROPOUT = "paper", True

#: The papers' names, notes and citations for the terms the parts return.
PAPER = parts.Wording.of(
    params=MEGATRON_PARAMS, saved=KORTHIKANTI, matmuls=NARAYANAN, per_head=True,
    names={
        "attention/norm_input": "attention/layernorm_input",
        "mlp/norm_input": "mlp/layernorm_input",
        "mlp/input": "mlp/fc1_input",
        "mlp/act_input": "mlp/gelu_input",
        "layer/attention/norm_weight": "layer/attention/layernorm_weight",
        "layer/attention/norm_bias": "layer/attention/layernorm_bias",
        "layer/attention/output_weight": "layer/attention/projection_weight",
        "layer/attention/output_bias": "layer/attention/projection_bias",
        "layer/mlp/norm_weight": "layer/mlp/layernorm_weight",
        "layer/mlp/norm_bias": "layer/mlp/layernorm_bias",
        "layer/attention/output": "layer/attention/projection",
        "output/final_norm_weight": "output/final_layernorm_weight",
        "output/final_norm_bias": "output/final_layernorm_bias",
    },
    notes={
        "attention/layernorm_input": "the layer input; LayerNorm needs it for its backward",
        "attention/qkv_input": "LayerNorm output, the shared input of the Q, K, V projections",
        "mlp/layernorm_input": "the MLP block's LayerNorm input",
        "mlp/fc1_input": "LayerNorm output, the first linear's input",
        "mlp/gelu_input": "first linear's output, GeLU's input",
        "mlp/fc2_input": "GeLU output, the second linear's input",
        "layer/attention/qkv_weight": "Q, K, V: three h×h",
        "layer/attention/projection_weight": "O: h×h",
        "layer/attention/qkv": "",
        "output/final_layernorm_weight": "not in Eq 2",
        "output/final_layernorm_bias": "not in Eq 2",
        "output/projection_weight": "untied output layer: another V·h",
        "output/logits": "hidden states × word embeddingᵀ",
    },
    sources={
        "output/final_layernorm_weight": FINAL_LAYERNORM,
        "output/final_layernorm_bias": FINAL_LAYERNORM,
        "output/projection_weight": "seed 001 §2 (untied)",
    },
)


def layer(ffn: Expr = GPT_FFN, activation: str = "gelu") -> parts.Part:
    """One GPT layer's parts, composed (:func:`composed.layer`) and named as the papers name them."""
    return composed.layer(replace(RECIPE, activation=activation), KERNEL, ffn=ffn, kv_heads=a, dropout=DROPOUT,
                          wording=PAPER)


def saved_tensors(ffn: Expr = GPT_FFN, activation: str = "gelu") -> Inventory:
    """Every tensor one GPT layer saves for backward (Korthikanti §4.1), in the paper's form.

    Attention block: 11sbh + 5as²b bytes; MLP block: 19sbh bytes (f = 4h).
    ``activation``: ``gelu``, the fused GeLU the papers count (it keeps its
    input); ``gelu_new`` or ``gelu_fast``, HF's element-wise tanh chains,
    which keep 3 or 6 more (s, b, f) tensors (:data:`parts.CHAINS`; GPT-2's
    default ``gelu_new``: 24sbh more at f = 4h). A backend's own terms
    (LayerNorm statistics, the mask dtype) are :func:`conventions.with_conventions`.
    """
    return Inventory(paper_form(Inventory(layer(ffn, activation).saved)).terms)


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
    body = layer(ffn).params
    return Inventory(body + composed.model_side(RECIPE, tied, table if positions == "learned" else None, PAPER).params)


def matmuls(ffn: Expr = GPT_FFN) -> Inventory:
    """The matmuls of one layer's forward and of the logits (Narayanan §5.1).

    Per layer: QKV 6bsh², Q·Kᵀ 2bs²h, scores·V 2bs²h, projection 2bsh²,
    MLP 2·2bsh·f. The attention products are counted over the full s×s matrix,
    as Narayanan and Korthikanti do (no causal-mask saving).
    """
    return Inventory(layer(ffn).matmuls + composed.model_side(RECIPE, True, wording=PAPER).matmuls)


def inventories(structure) -> tuple[Inventory, Inventory, Inventory]:
    """(parameters, saved tensors, matmuls) of a GPT :class:`~symbolic.models.structure.Structure`:
    f = 4h unless the config gives the width (the letter f), the position table of P rows or s."""
    ffn = f if structure.symbolic_ffn else GPT_FFN
    return (parameters(ffn=ffn, tied=structure.tied, positions=structure.positions,
                       table=P if structure.position_table else s),
            saved_tensors(ffn=ffn, activation=structure.activation), matmuls(ffn=ffn))
