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

from functools import lru_cache

from sympy import ceiling

from ...core.dims import V, b, h, s
from ...core.tensors import Axis, Group, Inventory, Matmul, SavedTensor
from ..losses import LOSS_KERNELS
from . import llama, parts
from .conventions import CUDA, conventions

TORCH_CE = "torch F.cross_entropy = log_softmax + nll_loss"
FINAL_LAYERNORM = "GPT-2/Megatron final LayerNorm"
NORMS = ("layernorm", "rmsnorm-eager", "rmsnorm-fused")


HF_LOSS = "HF transformers ForCausalLMLoss: logits.float(), torch F.cross_entropy = log_softmax + nll_loss"
MEGATRON_CE = "Megatron-LM d98e8a6 megatron/core/tensor_parallel/cross_entropy.py (VocabParallelCrossEntropy)"
TORCH_LOSS_PARALLEL = ("PyTorch 2.13.0 torch/distributed/tensor/parallel/loss.py (loss_parallel: _log_softmax on the "
                       "local shard with all-reduced max and sum of exp, _nll_loss_forward)")
FLASH_CE = ("flash-attention (Dao 2023, FlashAttention-2's repository) 0251105 flash_attn/ops/triton/cross_entropy.py "
            "(CrossEntropyLossFunction, "
            "inplace_backward=False as llm-foundry's FusedCrossEntropyLoss(ignore_index=-100) leaves it)")
TORCHTUNE_CE = "torchtune 10ff7cd torchtune/modules/loss/ce_chunked_output_loss.py (CEWithChunkedOutputLoss)"
LIGER_CE = ("Liger-Kernel ead96b6 src/liger_kernel/ops/fused_linear_cross_entropy.py (a torch.autograd.Function "
            "over Triton kernels)")
#: Where Liger's forward skips the output weight's gradient when the weight is frozen (read, not measured).
LIGER_FROZEN = ("liger-kernel 0.8.5 (PyPI) liger_kernel/ops/fused_linear_cross_entropy.py, "
                "fused_linear_cross_entropy_forward: grad_weight = ... if weight_needs_grad else None "
                "(weight_needs_grad = weight.requires_grad), and the weight-gradient step runs only "
                "if grad_weight is not None")
#: torchtune's ``num_output_chunks`` default (CEWithChunkedOutputLoss.__init__)
TORCHTUNE_CHUNKS = 8
LOSS_SOURCES = {"eager": HF_LOSS, "vocab-parallel": MEGATRON_CE, "loss-parallel": TORCH_LOSS_PARALLEL,
                "fused": FLASH_CE, "chunked": TORCHTUNE_CE, "liger": LIGER_CE}
LOSS_WORDS = {"eager": "transformers' eager cross-entropy (fp32 logits)",
              "vocab-parallel": "Megatron's vocab-parallel cross-entropy",
              "loss-parallel": "PyTorch's loss_parallel cross-entropy (vocab-sharded DTensor logits)",
              "fused": "flash-attn's fused cross-entropy", "chunked": "torchtune's chunked cross-entropy (8 chunks)",
              "liger": "Liger's fused linear cross-entropy"}

#: Liger's row chunk: next_power_of_2(ceil(B·T / ceil(V/H))) rows (fused_linear_cross_entropy_forward),
#: bounded here by twice the unrounded count (a power of two is below 2x its argument): an upper bound,
#: at most 2x a tensor of about s·b·h elements.
LIGER_CHUNK_ROWS = 2 * ceiling(s * b / ceiling(V / h))


def _check_loss(loss: str) -> None:
    if loss not in LOSS_KERNELS:
        raise ValueError(f"loss must be one of {', '.join(LOSS_KERNELS)}, not {loss!r}")


def _saved(name, shape, dtype, split, split_dim, source, note) -> SavedTensor:
    return SavedTensor(name, shape, dtype, split, split_dim, Group.BODY, source, note)


def loss_saved(loss: str = "eager", loss_dtype: str = "fp32", weight_grad: bool = True) -> tuple[SavedTensor, ...]:
    """What the loss kernel keeps for backward, unsharded (the vocabulary splits by t: Axis.TENSOR,
    where the kernel runs on vocabulary-sharded logits — vocab-parallel, fused; the eager loss runs on
    the whole vocabulary: transformers' tensor-parallel plan gathers the output layer's logits,
    ``_tp_plan = {"lm_head": "colwise_gather_output"}`` in models/llama/modeling_llama.py at 5.24.0,
    as PyTorch's ``ColwiseParallel(output_layouts=Replicate())`` does — measured on one rank of it,
    :mod:`symbolic.per_rank`; chunked and liger are refused under TP).

    eager: ``F.cross_entropy(logits.float())`` keeps the fp32 log-softmax (s·b·V), nll_loss's int64
    targets and its total weight. vocab-parallel (``VocabParallelCrossEntropy.forward``:
    ``ctx.save_for_backward(exp_logits, target_mask, masked_target_1d)``): the fp32 softmax (the
    upcast logits exponentiated and normalised in place), the bool target mask and the int64 masked
    targets. fused (``CrossEntropyLossFunction.forward``: ``ctx.save_for_backward(logits, lse,
    labels)``): the logits themselves in their dtype (bf16), the fp32 log-sum-exp per row, the int64
    labels. chunked (torchtune, uncompiled): each chunk's ``F.cross_entropy(chunk.float())`` keeps
    its fp32 log-softmax — all chunks, s·b·V together — its targets and nll_loss's total weight
    (one scalar per chunk). liger (not ``defer_grads``:
    ``ctx.save_for_backward(grad_input, grad_weight, grad_bias)``): the gradients are computed in
    the forward — the input's (s·b·h, bf16) and the output weight's (V·h, the weight's dtype: bf16
    working weights assumed); no logits and no log-softmax are kept.

    ``weight_grad``: whether the output layer's weight trains. False — a frozen output layer, as under
    LoRA (PEFT's ``all-linear`` leaves the output layer out, and the base is frozen) — Liger allocates
    no weight gradient (:data:`LIGER_FROZEN`): ``grad_weight`` is None, so only the input's gradient
    is kept. The other kernels keep no weight gradient in the loss and do not depend on it.
    """
    _check_loss(loss)
    if loss in ("eager", "chunked"):
        source = HF_LOSS if loss == "eager" else TORCHTUNE_CE
        return (_saved("output/log_softmax", (s, b, V), loss_dtype, Axis.NONE, None, source,
                       f"log-softmax of the logits, {loss_dtype}: s·b·V values"
                       + (" (every chunk's, kept until its backward)" if loss == "chunked" else "")),
                _saved("output/targets", (s, b), "int64", Axis.NONE, None, source,
                       "the target token ids, kept by nll_loss"),
                _saved("output/loss_total_weight", () if loss == "eager" else (TORCHTUNE_CHUNKS,), "fp32",
                       Axis.NONE, None, source, "nll_loss's total weight, one scalar"
                       + (" per chunk" if loss == "chunked" else "")))
    if loss == "loss-parallel":  # F.cross_entropy's log_softmax + nll_loss, on the rank's V/t columns
        return (_saved("output/log_softmax", (s, b, V), loss_dtype, Axis.TENSOR, 2, TORCH_LOSS_PARALLEL,
                       f"log-softmax of the rank's vocabulary shard, {loss_dtype} (the row max and sum of exp "
                       "all-reduced)"),
                _saved("output/targets", (s, b), "int64", Axis.NONE, None, TORCH_LOSS_PARALLEL,
                       "the target token ids, kept by nll_loss"),
                _saved("output/loss_total_weight", (), "fp32", Axis.NONE, None, TORCH_LOSS_PARALLEL,
                       "nll_loss's total weight, one scalar"))
    if loss == "vocab-parallel":
        return (_saved("output/softmax", (s, b, V), "fp32", Axis.TENSOR, 2, MEGATRON_CE,
                       "exp_logits / sum: the fp32 softmax, its backward's gradient computed in place"),
                _saved("output/target_mask", (s, b), "mask", Axis.NONE, None, MEGATRON_CE,
                       "target outside this rank's vocabulary slice (bool)"),
                _saved("output/masked_target", (s, b), "int64", Axis.NONE, None, MEGATRON_CE,
                       "masked_target_1d, the targets' index into the slice"))
    if loss == "fused":
        return (_saved("output/logits", (s, b, V), "bf16", Axis.TENSOR, 2, FLASH_CE,
                       "the logits in their own dtype, saved by the kernel (no fp32 copy)"),
                _saved("output/lse", (s, b), "fp32", Axis.NONE, None, FLASH_CE, "log-sum-exp per row, fp32"),
                _saved("output/labels", (s, b), "int64", Axis.NONE, None, FLASH_CE, "the target token ids"))
    grad_input = _saved("output/grad_input", (s, b, h), "bf16", Axis.SEQUENCE, 0, LIGER_CE,
                        "d(loss)/d(final norm output), computed in the forward")
    if not weight_grad:  # a frozen output weight: grad_weight is None (LIGER_FROZEN), said on the line kept
        return (_saved("output/grad_input", (s, b, h), "bf16", Axis.SEQUENCE, 0, f"{LIGER_CE}; {LIGER_FROZEN}",
                       "d(loss)/d(final norm output), computed in the forward; the output weight is frozen "
                       "(LoRA): no grad_weight, no weight-gradient step"),)
    return (grad_input,
            _saved("output/grad_weight", (V, h), "bf16", Axis.NONE, None, LIGER_CE,
                   "d(loss)/d(output weight), computed in the forward (the weight's dtype)"))


def loss_work(loss: str = "eager", weight_grad: bool = True) -> tuple[SavedTensor, ...]:
    """The loss kernel's work tensors, unsharded: what is alive beside its saved tensors while it runs
    (the bill's loss instant holds them all at once: an upper bound where forward and backward
    temporaries do not overlap in time).

    loss-parallel: the logits' vocabulary shard (bf16), its fp32 gradient and the two all-reduced fp32
    row statistics (max, sum of exp) of PyTorch's ``_log_softmax``.
    eager: the bf16 logits (the model's output, alive through backward) and the fp32 gradient of the
    logits. vocab-parallel: one bf16 s·b·V tensor — the logits in forward (their fp32 upcast is the
    saved softmax, exponentiated in place), the gradient autograd casts back to the logits' bf16 in
    backward (``grad_input = softmax`` is computed in place) — and the fp32 per-row logits max,
    predicted logit and sum of exponentials. fused: the fp32 losses and z-losses per row and, in
    backward, ``dlogits = torch.empty_like(logits)`` (bf16). chunked: the bf16 logits of every chunk
    (the model's chunked output; the recipe deletes them before backward) and one chunk's fp32
    upcast, s·b·V/8. liger: one row chunk's bf16 logits (LIGER_CHUNK_ROWS × V, its gradient computed
    in place), and the weight-gradient step's ``torch.mm(grad_logits_chunk.t(), _input_chunk)`` (V·h,
    bf16) and its ``.float()`` copy (V·h, fp32) — the path a bf16 grad_weight takes (accum_dtype None);
    the fp32 loss per row. With ``weight_grad`` False (a frozen output weight, as under LoRA) Liger's
    weight-gradient step does not run (:data:`LIGER_FROZEN`): neither V·h temporary exists.
    """
    _check_loss(loss)
    work = {
        "eager": (("loss/logits", (s, b, V), "bf16", Axis.NONE, None, HF_LOSS,
                   "output layer result, the whole vocabulary (gathered under TP)"),
                  ("loss/grad_logits_fp32", (s, b, V), "fp32", Axis.NONE, None, HF_LOSS,
                   "d(loss)/d(logits), fp32")),
        "loss-parallel": (("loss/logits", (s, b, V), "bf16", Axis.TENSOR, 2, TORCH_LOSS_PARALLEL,
                           "the output layer's vocabulary shard (a DTensor's local tensor)"),
                          ("loss/grad_logits_fp32", (s, b, V), "fp32", Axis.TENSOR, 2, TORCH_LOSS_PARALLEL,
                           "d(loss)/d(logits) of the shard, fp32"),
                          ("loss/row_statistics_fp32", (2, s, b), "fp32", Axis.NONE, None, TORCH_LOSS_PARALLEL,
                           "the row max and sum of exp, all-reduced, fp32 per row")),
        "vocab-parallel": (("loss/logits", (s, b, V), "bf16", Axis.TENSOR, 2, MEGATRON_CE,
                            "the logits (forward), then their bf16 gradient (backward)"),
                           ("loss/row_statistics_fp32", (3, s, b), "fp32", Axis.NONE, None, MEGATRON_CE,
                            "logits max, predicted logit, sum of exp: fp32 per row")),
        "fused": (("loss/row_losses_fp32", (2, s, b), "fp32", Axis.NONE, None, FLASH_CE,
                   "losses and z_losses, fp32 per row"),
                  ("loss/grad_logits", (s, b, V), "bf16", Axis.TENSOR, 2, FLASH_CE,
                   "dlogits = torch.empty_like(logits) in backward")),
        "chunked": (("loss/logits", (s, b, V), "bf16", Axis.TENSOR, 2, TORCHTUNE_CE,
                     "the chunked output layer's results, all chunks"),
                    ("loss/chunk_logits_fp32", (ceiling(s / TORCHTUNE_CHUNKS), b, V), "fp32", Axis.TENSOR, 2,
                     TORCHTUNE_CE, "one chunk's logits.float()")),
        "liger": (("loss/chunk_logits", (LIGER_CHUNK_ROWS, V), "bf16", Axis.NONE, None, LIGER_CE,
                   "one row chunk's logits, then their gradient in place (rows: an upper bound, 2x the "
                   "unrounded next_power_of_2 argument)"),
                  ("loss/grad_weight_chunk", (V, h), "bf16", Axis.NONE, None, LIGER_CE,
                   "torch.mm(grad_logits_chunk.t(), _input_chunk)"),
                  ("loss/grad_weight_chunk_fp32", (V, h), "fp32", Axis.NONE, None, LIGER_CE, "its .float()"),
                  ("loss/row_losses_fp32", (s, b), "fp32", Axis.NONE, None, LIGER_CE, "loss_1d, fp32 per row")),
    }[loss]
    if not weight_grad:  # no grad_weight: Liger's weight-gradient step is skipped (LIGER_FROZEN)
        work = tuple(term for term in work if not term[0].startswith("loss/grad_weight"))
    return tuple(_saved(*term) for term in work)


@lru_cache(maxsize=256)  # a pure function of five frozen choices: the kinds of a loop share its inventory
def saved_tensors(norm: str = "rmsnorm-eager", loss_dtype: str = "fp32", backend=CUDA,
                  loss: str = "eager", weight_grad: bool = True) -> Inventory:
    """What the final norm, the logits and the loss keep for backward.

    ``norm``: ``layernorm`` (GPT; its statistics follow ``backend``),
    ``rmsnorm-eager`` (HF LLaMA) or ``rmsnorm-fused``. ``loss_dtype``: the
    dtype the eager loss computes the log-softmax in (fp32 in HF; bf16 when the
    logits are not upcast). The vocabulary splits under TP (Megatron's
    vocab-parallel cross entropy). ``loss``: the loss kernel (:data:`LOSS_KERNELS`,
    :func:`loss_saved`); every kernel but Liger's, which computes the input's
    gradient in its forward, keeps the output projection's input. ``weight_grad``: whether the
    output side's weights train. False — the frozen base of LoRA (PEFT's ``all-linear`` leaves the output
    layer unadapted) — keeps nothing for a weight's gradient: no output projection input (a frozen linear
    keeps only its weight for the input's gradient), no RMSNorm x·rstd (``*_normalized``), and Liger no
    weight gradient (:func:`loss_saved`); measured on one rank of PEFT (:mod:`symbolic.per_rank`).
    """
    conv = conventions(backend)
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {', '.join(NORMS)}, not {norm!r}")
    _check_loss(loss)
    if norm == "layernorm":  # the norm part, in the GPT layer's citation (its statistics the backend's)
        wording = parts.Wording.of(saved=FINAL_LAYERNORM, notes={
            "output/final_norm_input": "the last layer's output",
            **{f"output/final_norm_{n}": f"LayerNorm per-row {n} ({conv.name})" for n in ("mean", "rstd")}})
        final = parts.cite(parts.norm("output/final_norm", "layernorm", conv=conv), wording).saved
    else:
        final = llama.rmsnorm("output/final_norm", norm.removeprefix("rmsnorm-"))
    logits_input = () if loss == "liger" or not weight_grad else (
        SavedTensor("output/logits_input", (s, b, h), "bf16", Axis.SEQUENCE, 0, Group.BODY, TORCH_CE,
                    "final norm output, the output projection's input"),)
    if not weight_grad:
        final = tuple(term for term in final if not term.name.endswith("_normalized"))
    return Inventory((*final, *logits_input, *loss_saved(loss, loss_dtype, weight_grad)))


def matmuls() -> Inventory:
    """The logits: (b·s × h) @ (h × V). The softmax and loss are element-wise (not counted)."""
    return Inventory((Matmul("output/logits", 1, b * s, h, V, True, "output", TORCH_CE),))
