"""The output side: final norm, logits and the cross-entropy loss, as their own lines.

Korthikanti §4.1 and seed 001 leave the output layer out of the per-layer
count (its Eq 5 adds only the embedding's dropout on the first stage). For a
large vocabulary it matters: the log-softmax of the logits is s·b·V values,
in fp32 as HuggingFace computes the loss (``ForCausalLMLoss`` upcasts the
logits before ``cross_entropy``). One sequence of s = 8192 tokens over a
128k vocabulary keeps 4·8192·128256 B ≈ 4.2 GB here, more than a layer.

What ``F.cross_entropy(logits.float(), targets)`` keeps (log-softmax then
NLL): the fp32 log-softmax output (not the logits: the upcast keeps nothing),
the int64 targets and NLL's fp32 total weight (one scalar). The logits
matmul keeps its input, the final norm's output.
"""
from __future__ import annotations

from ...core.dims import V, b, h, s
from ...core.tensors import Axis, Group, Inventory, Matmul, SavedTensor
from . import llama, parts
from .conventions import CUDA, conventions

TORCH_CE = "torch F.cross_entropy = log_softmax + nll_loss"
FINAL_LAYERNORM = "GPT-2/Megatron final LayerNorm"
NORMS = ("layernorm", "rmsnorm-eager", "rmsnorm-fused")


def saved_tensors(norm: str = "rmsnorm-eager", loss_dtype: str = "fp32", backend=CUDA) -> Inventory:
    """What the final norm, the logits and the loss keep for backward.

    ``norm``: ``layernorm`` (GPT; its statistics follow ``backend``),
    ``rmsnorm-eager`` (HF LLaMA) or ``rmsnorm-fused``. ``loss_dtype``: the
    dtype the loss computes the log-softmax in (fp32 in HF; bf16 when the
    logits are not upcast). The vocabulary splits under TP (Megatron's
    vocab-parallel cross entropy).
    """
    conv = conventions(backend)
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {', '.join(NORMS)}, not {norm!r}")
    if norm == "layernorm":  # the norm part, in the GPT layer's citation (its statistics the backend's)
        wording = parts.Wording.of(saved=FINAL_LAYERNORM, notes={
            "output/final_norm_input": "the last layer's output",
            **{f"output/final_norm_{n}": f"LayerNorm per-row {n} ({conv.name})" for n in ("mean", "rstd")}})
        final = parts.cite(parts.norm("output/final_norm", "layernorm", conv=conv), wording).saved
    else:
        final = llama.rmsnorm("output/final_norm", norm.removeprefix("rmsnorm-"))
    return Inventory((
        *final,
        SavedTensor("output/logits_input", (s, b, h), "bf16", Axis.SEQUENCE, 0, Group.BODY, TORCH_CE,
                    "final norm output, the output projection's input"),
        SavedTensor("output/log_softmax", (s, b, V), loss_dtype, Axis.TENSOR, 2, Group.BODY, TORCH_CE,
                    f"log-softmax of the logits, {loss_dtype}: s·b·V values"),
        SavedTensor("output/targets", (s, b), "int64", Axis.NONE, None, Group.BODY, TORCH_CE,
                    "the target token ids, kept by nll_loss"),
        SavedTensor("output/loss_total_weight", (), "fp32", Axis.NONE, None, Group.BODY, TORCH_CE,
                    "nll_loss's total weight, one scalar"),
    ))


def matmuls() -> Inventory:
    """The logits: (b·s × h) @ (h × V). The softmax and loss are element-wise (not counted)."""
    return Inventory((Matmul("output/logits", 1, b * s, h, V, True, "output", TORCH_CE),))
