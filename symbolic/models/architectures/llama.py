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

Nothing here is a typed coefficient: the ledgers sum the shapes.
"""
from __future__ import annotations

from sympy import Expr

from ...core.dims import V, a, b, f, g, h, s
from ...core.tensors import Axis, Group, Inventory, Matmul, Parameter, SavedTensor
from .conventions import CUDA, conventions

HF_LLAMA = "HF transformers 5.24.0 LlamaDecoderLayer"
FLASH = "Dao 2023 §3.1 (FlashAttention-2); torch SDPA"
LLAMA = "Touvron et al. 2023 §2.2; Ainslie et al. 2023 (GQA)"

ATTENTION = ("fused", "explicit")
NORMS = ("eager", "fused")


def _hidden(name, dtype="bf16", group=Group.BODY, note="", source=HF_LLAMA):
    """An (s, b, h) tensor: replicated under TP, split along s by SP."""
    return SavedTensor(name, (s, b, h), dtype, Axis.SEQUENCE, 0, group, source, note)


def _rows(name, dtype, note, source=HF_LLAMA):
    """One value per token, (s, b)."""
    return SavedTensor(name, (s, b), dtype, Axis.SEQUENCE, 0, Group.BODY, source, note)


def _heads(name, heads, note, source=HF_LLAMA):
    """An (s, b, heads, h/a) tensor; TP splits the heads."""
    return SavedTensor(name, (s, b, heads, h / a), "bf16", Axis.TENSOR, 2, Group.BODY, source, note)


def _ffn(name, ffn, note):
    return SavedTensor(name, (s, b, ffn), "bf16", Axis.TENSOR, 2, Group.BODY, HF_LLAMA, note)


def rmsnorm(prefix: str, norm: str, layer_input: bool = False) -> tuple[SavedTensor, ...]:
    """What one RMSNorm keeps (its output's consumer keeps the output).

    ``eager`` (HF ``LlamaRMSNorm``): fp32 copy of the input (pow and the
    normalising multiply keep it), fp32 rstd per row, the normalised tensor in
    the activation dtype (kept by the weight multiply). ``fused``: the input
    and the fp32 rstd per row.
    """
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {', '.join(NORMS)}, not {norm!r}")
    group = Group.LAYER_INPUT if layer_input else Group.BODY
    if norm == "fused":
        return (_hidden(f"{prefix}_input", "bf16", group, "the norm's input", "fused RMSNorm kernel"),
                _rows(f"{prefix}_rstd", "fp32", "1/rms per row, fp32", "fused RMSNorm kernel"))
    return (
        _hidden(f"{prefix}_input_fp32", "fp32", group, "input upcast to fp32: kept by pow and by x·rstd"),
        _rows(f"{prefix}_rstd", "fp32", "rsqrt(mean(x²)+eps) per row, fp32"),
        _hidden(f"{prefix}_normalized", "bf16", note="x·rstd cast back, kept for the weight's gradient"),
    )


def attention_core(attn: str = "fused", kv_heads: Expr = g) -> tuple[SavedTensor, ...]:
    """The attention core's saved tensors between the QKV input and the output projection."""
    if attn not in ATTENTION:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION)}, not {attn!r}")
    if attn == "fused":
        return (
            _heads("attention/query", a, "Q after RoPE, kept by the kernel", FLASH),
            _heads("attention/key", kv_heads, "K after RoPE, g heads (native GQA)", FLASH),
            _heads("attention/value", kv_heads, "V, g heads (native GQA)", FLASH),
            SavedTensor("attention/logsumexp", (b, a, s), "fp32", Axis.TENSOR, 1, Group.BODY, FLASH,
                        "log-sum-exp of each score row, fp32: the softmax is recomputed from it in backward"),
            _heads("attention/projection_input", a, "the kernel's output, also the output projection's input",
                   FLASH),
        )
    return (
        _heads("attention/query", a, "Q after RoPE, kept for Q·Kᵀ"),
        _heads("attention/key", a, "K after RoPE, repeated to a heads (repeat_kv), kept for Q·Kᵀ"),
        SavedTensor("attention/softmax_output", (b, a, s, s), "fp32", Axis.TENSOR, 1, Group.ATTENTION_CORE,
                    HF_LLAMA, "softmax computed and kept in fp32"),
        SavedTensor("attention/probabilities", (b, a, s, s), "bf16", Axis.TENSOR, 1, Group.ATTENTION_CORE,
                    HF_LLAMA, "softmax cast back to the activation dtype, kept for ·V"),
        _heads("attention/value", a, "V repeated to a heads (repeat_kv), kept for ·V"),
        _heads("attention/projection_input", a, "attention context, the output projection's input"),
    )


def saved_tensors(ffn: Expr = f, kv_heads: Expr = g, attention: str = "fused", norm: str = "eager",
                  backend=CUDA) -> Inventory:
    """Every tensor one LLaMA layer saves for backward (see the module docstring).

    ``backend``: the conventions (``cuda``/``cpu``); this layer has no dropout
    and no LayerNorm, so both give the same inventory.
    """
    conventions(backend)
    return Inventory((
        *rmsnorm("attention/norm", norm, layer_input=True),
        _hidden("attention/qkv_input", note="RMSNorm output (× weight), shared input of the Q, K, V projections"),
        *attention_core(attention, kv_heads),
        *rmsnorm("mlp/norm", norm),
        _hidden("mlp/gate_up_input", note="RMSNorm output (× weight), shared input of gate and up"),
        _ffn("mlp/gate_output", ffn, "gate projection's output, SiLU's input"),
        _ffn("mlp/silu_output", ffn, "SiLU output, kept for the product's backward"),
        _ffn("mlp/up_output", ffn, "up projection's output, kept for the product's backward"),
        _ffn("mlp/down_input", ffn, "silu(gate)·up, the down projection's input"),
    ))


def parameters(ffn: Expr = f, tied: bool = False, positions: str = "rope", kv_heads: Expr = g) -> Inventory:
    """The parameters of a LLaMA model: no biases, RoPE (no position table).

    ``tied``: the output layer reuses the word embedding (LLaMA 1–3 untie it;
    Llama 3.2 1B/3B tie it). K and V project to g·h/a each (GQA).
    """
    if positions != "rope":
        raise ValueError(f"LLaMA layers use rotary positions (positions='rope'), not {positions!r}")
    kv = kv_heads * h / a
    layer = [
        Parameter("layer/attention/norm_weight", (h,), "layer", LLAMA),
        Parameter("layer/attention/query_weight", (h, h), "layer", LLAMA, "a heads of h/a"),
        Parameter("layer/attention/key_weight", (h, kv), "layer", LLAMA, "g heads of h/a"),
        Parameter("layer/attention/value_weight", (h, kv), "layer", LLAMA, "g heads of h/a"),
        Parameter("layer/attention/output_weight", (h, h), "layer", LLAMA),
        Parameter("layer/mlp/norm_weight", (h,), "layer", LLAMA),
        Parameter("layer/mlp/gate_weight", (h, ffn), "layer", LLAMA, "SwiGLU gate"),
        Parameter("layer/mlp/up_weight", (h, ffn), "layer", LLAMA, "SwiGLU up"),
        Parameter("layer/mlp/down_weight", (ffn, h), "layer", LLAMA),
    ]
    embedding = [Parameter("embedding/word", (V, h), "embedding", LLAMA, "tied: also the output layer" if tied else "")]
    output = [Parameter("output/final_norm_weight", (h,), "output", LLAMA, "final RMSNorm")]
    if not tied:
        output.append(Parameter("output/projection_weight", (h, V), "output", LLAMA, "untied output layer"))
    return Inventory(tuple(layer + embedding + output))


def matmuls(ffn: Expr = f, kv_heads: Expr = g) -> Inventory:
    """The matmuls of one layer's forward and of the logits.

    Per layer: Q and O 2bsh² each, K and V 2bsh·(g h/a) each, Q·Kᵀ and
    scores·V 2bs²h each (full s×s, as FlopCounterMode and the papers count),
    gate, up and down 2bsh·f each. The explicit kernel repeats K and V to a
    heads, the fused one broadcasts them: the same multiply-adds.
    """
    tokens = b * s
    kv = kv_heads * h / a
    return Inventory((
        Matmul("layer/attention/query", 1, tokens, h, h, True, "layer", LLAMA),
        Matmul("layer/attention/key", 1, tokens, h, kv, True, "layer", LLAMA),
        Matmul("layer/attention/value", 1, tokens, h, kv, True, "layer", LLAMA),
        Matmul("layer/attention/scores", b * a, s, h / a, s, False, "layer", LLAMA, "Q·Kᵀ per head",
               Group.ATTENTION_CORE),
        Matmul("layer/attention/context", b * a, s, s, h / a, False, "layer", LLAMA, "probabilities·V per head",
               Group.ATTENTION_CORE),
        Matmul("layer/attention/output", 1, tokens, h, h, True, "layer", LLAMA),
        Matmul("layer/mlp/gate", 1, tokens, h, ffn, True, "layer", LLAMA),
        Matmul("layer/mlp/up", 1, tokens, h, ffn, True, "layer", LLAMA),
        Matmul("layer/mlp/down", 1, tokens, ffn, h, True, "layer", LLAMA),
        Matmul("output/logits", 1, tokens, h, V, True, "output", LLAMA, "hidden states × output weight"),
    ))


#: The products a fused attention kernel recomputes in its backward: it keeps
#: only the log-sum-exp, so Q·Kᵀ is computed again (FlashAttention-2 §3.1.2,
#: torch ``sdpa_backward_flop_count`` step 1).
FUSED_BACKWARD_RECOMPUTE = ("layer/attention/scores",)


def fused_backward_recompute(inventory: Inventory) -> Expr:
    """FLOPs a fused attention kernel adds to one layer's backward (the recomputed Q·Kᵀ)."""
    from sympy import Add
    return Add(*(mm.forward_flops for mm in inventory if mm.name in FUSED_BACKWARD_RECOMPUTE))
