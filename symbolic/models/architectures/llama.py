"""The LLaMA-style layer: RMSNorm, grouped-query attention with RoPE, SwiGLU, no dropout.

Touvron et al. 2023 (LLaMA, arXiv 2302.13971 §2.2), Ainslie et al. 2023 (GQA,
arXiv 2305.13245), Shazeer 2020 (SwiGLU, arXiv 2002.05202), Dao 2023
(FlashAttention-2, arXiv 2307.08691 §3.1: the forward keeps the output and
the log-sum-exp per row, not the s×s matrices). As implemented by HuggingFace
transformers 5.24.0 ``LlamaDecoderLayer`` (``modeling_llama.py``), which the
tests trace; conditions:

- ``a`` query heads of width h/a, ``g`` key/value heads (g divides a), RoPE on
  Q and K (the cos/sin tables are per model, not per layer: not counted);
- SwiGLU MLP ``down(silu(gate(x)) * up(x))`` of its own width ``f``;
- ``norm="eager"``: HF's ``LlamaRMSNorm`` — upcasts its input to fp32, keeps
  that fp32 copy, the fp32 rstd per row and the normalised tensor cast back
  (for the weight's gradient); ``norm="fused"``: a fused RMSNorm kernel
  (Apex/Transformer Engine) keeping its input and the fp32 rstd;
- ``attention="fused"``: SDPA/FlashAttention with native GQA
  (``enable_gqa``) keeps Q, K, V (K and V at g heads), the output and an fp32
  log-sum-exp per row and head; ``attention="explicit"``: HF's eager
  attention — K and V repeated to ``a`` heads (``repeat_kv``) before the
  matmuls, softmax in fp32 (kept), probabilities cast back (kept); one
  exception, traced and tested: with b = 1 and g = 1 (MQA, one sequence) the
  repeat is a view and K, V are kept at one head;
- 2-byte activations; no dropout (``attention_dropout = 0``), so the backend
  conventions (dropout masks, LayerNorm statistics) do not change this layer.

The layer is :data:`RECIPE` composed from the same parts as every other
family (:func:`composed.layer`), in this inventory's names (:data:`WORDING`).
Nothing here is a typed coefficient: the ledgers sum the shapes.
"""
from __future__ import annotations

from dataclasses import replace

from sympy import Expr

from ...core.dims import a, f, g, h
from ...core.tensors import Inventory, SavedTensor
from ..config import Recipe
from . import composed, parts
from .conventions import CUDA

HF_LLAMA = "HF transformers 5.24.0 LlamaDecoderLayer"
FLASH = parts.FLASH
LLAMA = "Touvron et al. 2023 §2.2; Ainslie et al. 2023 (GQA)"

ATTENTION = ("fused", "explicit")
NORMS = ("eager", "fused")

#: The parts of the LLaMA layer (the composed families' defaults): pre-RMSNorm, Q, K, V and O
#: without biases, a query heads and g key/value heads of width h/a, a SwiGLU MLP, no dropout.
RECIPE = Recipe("llama")

#: ``norm`` as the norm part's kind: HF's eager RMSNorm, or a fused kernel.
NORM_KINDS = {"eager": "rmsnorm", "fused": "rmsnorm_fused"}

#: The LLaMA inventory's names, notes and citations for the terms the parts return.
WORDING = parts.Wording.of(
    params=LLAMA, saved=HF_LLAMA, matmuls=LLAMA, per_head=True,
    names={"mlp/input": "mlp/gate_up_input", "mlp/act_output": "mlp/silu_output"},
    notes={
        "attention/qkv_input": "RMSNorm output (× weight), shared input of the Q, K, V projections",
        "mlp/gate_up_input": "RMSNorm output (× weight), shared input of gate and up",
        "mlp/gate_output": "gate projection's output, SiLU's input",
        "mlp/silu_output": "SiLU output, kept for the product's backward",
        "mlp/up_output": "up projection's output, kept for the product's backward",
        "mlp/down_input": "silu(gate)·up, the down projection's input",
        "layer/attention/query_weight": "a heads of h/a",
        "layer/attention/key_weight": "g heads of h/a",
        "layer/attention/value_weight": "g heads of h/a",
        "layer/mlp/gate_weight": "SwiGLU gate",
        "layer/mlp/up_weight": "SwiGLU up",
        "output/final_norm_weight": "final RMSNorm",
    },
)


def _check(attention: str = "fused", norm: str = "eager") -> None:
    if attention not in ATTENTION:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION)}, not {attention!r}")
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {', '.join(NORMS)}, not {norm!r}")


def layer(ffn: Expr = f, kv_heads: Expr = g, attention: str = "fused", norm: str = "eager",
          backend=CUDA) -> parts.Part:
    """One LLaMA layer's parts, composed (:func:`composed.layer`) and named as this inventory names them."""
    _check(attention, norm)
    return composed.layer(replace(RECIPE, norm=NORM_KINDS[norm]), attention, backend, ffn=ffn, kv_heads=kv_heads,
                          wording=WORDING)


def rmsnorm(prefix: str, norm: str, layer_input: bool = False) -> tuple[SavedTensor, ...]:
    """What one RMSNorm keeps (its output's consumer keeps the output): the norm part
    (:func:`parts.norm`) in this inventory's citation.

    ``eager`` (HF ``LlamaRMSNorm``): fp32 copy of the input (pow and the
    normalising multiply keep it), fp32 rstd per row, the normalised tensor in
    the activation dtype (kept by the weight multiply). ``fused``: the input
    and the fp32 rstd per row.
    """
    _check(norm=norm)
    return parts.cite(parts.norm(prefix, NORM_KINDS[norm], layer_input=layer_input), WORDING).saved


def attention_core(attn: str = "fused", kv_heads: Expr = g) -> tuple[SavedTensor, ...]:
    """The attention core's saved tensors between the QKV input and the output projection
    (:func:`parts.attention_core` in this inventory's citation)."""
    _check(attention=attn)
    return parts.cite(parts.attention_core(h / a, kv_heads, attn, per_head=True), WORDING).saved


def saved_tensors(ffn: Expr = f, kv_heads: Expr = g, attention: str = "fused", norm: str = "eager",
                  backend=CUDA) -> Inventory:
    """Every tensor one LLaMA layer saves for backward (see the module docstring).

    ``backend``: the conventions (``cuda``/``cpu``); this layer has no dropout
    and no LayerNorm, so both give the same inventory.
    """
    return Inventory(layer(ffn, kv_heads, attention, norm, backend).saved)


def parameters(ffn: Expr = f, tied: bool = False, positions: str = "rope", kv_heads: Expr = g) -> Inventory:
    """The parameters of a LLaMA model: no biases, RoPE (no position table).

    ``tied``: the output layer reuses the word embedding (LLaMA 1–3 untie it;
    Llama 3.2 1B/3B tie it). K and V project to g·h/a each (GQA).
    """
    if positions != "rope":
        raise ValueError(f"LLaMA layers use rotary positions (positions='rope'), not {positions!r}")
    return Inventory(layer(ffn, kv_heads).params + composed.model_side(RECIPE, tied, wording=WORDING).params)


def matmuls(ffn: Expr = f, kv_heads: Expr = g) -> Inventory:
    """The matmuls of one layer's forward and of the logits.

    Per layer: Q and O 2bsh² each, K and V 2bsh·(g h/a) each, Q·Kᵀ and
    scores·V 2bs²h each (full s×s, as FlopCounterMode and the papers count),
    gate, up and down 2bsh·f each. The explicit kernel repeats K and V to a
    heads, the fused one broadcasts them: the same multiply-adds.
    """
    return Inventory(layer(ffn, kv_heads).matmuls + composed.model_side(RECIPE, True, wording=WORDING).matmuls)


#: The products a fused attention kernel recomputes in its backward: it keeps
#: only the log-sum-exp, so Q·Kᵀ is computed again (FlashAttention-2 §3.1.2,
#: torch ``sdpa_backward_flop_count`` step 1).
FUSED_BACKWARD_RECOMPUTE = ("layer/attention/scores", "layer/attention/scores_window")


def fused_backward_recompute(inventory: Inventory) -> Expr:
    """FLOPs a fused attention kernel adds to one layer's backward (the recomputed Q·Kᵀ)."""
    from sympy import Add
    return Add(*(mm.forward_flops for mm in inventory if mm.name in FUSED_BACKWARD_RECOMPUTE))


def inventories(structure) -> tuple[Inventory, Inventory, Inventory]:
    """(parameters, saved tensors, matmuls) of a LLaMA :class:`~symbolic.models.structure.Structure`."""
    return parameters(tied=structure.tied, positions=structure.positions), saved_tensors(), matmuls()
