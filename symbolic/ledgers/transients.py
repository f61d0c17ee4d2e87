"""Kernel work tensors and communication buffers: the transient and the
communication classes of a training step's memory (seed 004 §02.3–§02.4), as
terms.

The timeline (:mod:`symbolic.step.timeline`) places them at the instants they
are alive; the bill's verdict (:mod:`symbolic.ledgers.peak`) sums the same
terms at each stage's peak instant. Sizes follow from shapes; how many of them
a real kernel keeps at once is a modelling choice stated at each term.
"""
from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, Integer

from ..core.dims import C_f, V, a, b, c, h, s
from ..core.dims import k as top_k  # experts per token
from ..core.dims import t as tensor_ways  # the tensor-parallel letter (the EP staging's rows under SP)
from ..core.tensors import Axis, Group, Inventory, SavedTensor
from ..layout.layout import Layout
from ..models.architectures import output
from ..models.config import ModelConfig
from .buffers import CommSettings, MiB, expert_groups  # noqa: F401 (re-exported: plain data, no sympy)

TRANSIENT_SOURCE = "seed 004 §02.3, §06.3 (work tensors); shapes as Korthikanti §4.1"


#: DeepSeek-V3's FP8 tiles (arXiv 2412.19437 §3.3.2 "Fine-Grained Quantization"): one fp32 scale for
#: every 1×128 tile of an activation row, 4 B per 128 elements.
FP8_TILE = 128


def expert_all_to_all_staging(model: ModelConfig, layout: Layout,
                              fp8_tile: int = FP8_TILE) -> list[tuple[str, Expr]]:
    """The expert-parallel all-to-all's send and receive buffers, allocated once
    and kept (seed 004 §02.4, §05.4: "每卡每方向 EP all-to-all staging"), sized
    from the layout, worst case: every row a rank dispatches or combines.

    Rows: the rank's own tokens, s·b/c (÷t under SP: each TP rank dispatches
    its sequence shard, Megatron-Core's ``MoEAlltoAllTokenDispatcher``), once
    per chosen expert — ×k; the receive side ×C_f, the busiest rank's share.
    Row width: h elements. The dispatch (forward) moves them in bf16, or in
    FP8 with ``--fp8-activations`` — the experts' input is quantised before
    the dispatch (DeepSeek-V3 §3.3.3 "Low-Precision Communication") — at 1 B
    plus one fp32 scale per ``fp8_tile`` elements (0: per-tensor scaling, the
    scale not counted). The combine (forward) returns the experts' outputs in
    bf16 (§3.3.3 keeps it in BF16). The backward all-to-alls — the combine's
    gradient dispatched, the dispatch's gradient combined, both bf16 — have
    the combine's rows and width in the opposite roles, and reuse its buffers
    (counted once). Condition: one micro-batch's all-to-all in flight (no
    overlap of two micro-batches' dispatches); rows for a rank's own local
    experts counted too (the (e−1)/e that crosses the network is an upper bound
    of e/(e−1) = 1.6% at e = 64). Empty without expert parallelism.
    """
    if not model.experts or layout.ep == 1:
        return []
    return all_to_all_staging(layout.sp, layout.cp > 1, layout.moe_capacity != 1, layout.fp8_activations, fp8_tile)


def all_to_all_staging(sequence_parallel: bool = False, context_parallel: bool = False, capacity: bool = False,
                       fp8: bool = False, fp8_tile: int = FP8_TILE) -> list[tuple[str, Expr]]:
    """:func:`expert_all_to_all_staging` by the layout's switches: SP (÷t),
    CP (÷c), a capacity factor (C_f on the receive side), FP8 dispatch."""
    tokens = s * b / (c if context_parallel else 1) / (tensor_ways if sequence_parallel else 1)
    sent, received = tokens * top_k, tokens * top_k * (C_f if capacity else 1)
    if fp8:
        dispatch_row = h + (4 * h / fp8_tile if fp8_tile else 0)
        dispatch = "fp8" + (f" + fp32 scale per 1×{fp8_tile} tile" if fp8_tile else "")
    else:
        dispatch_row, dispatch = 2 * h, "bf16"
    name = "communication/EP all-to-all staging"
    return [(f"{name}, dispatch send ({dispatch})", sent * dispatch_row),
            (f"{name}, dispatch receive ({dispatch})", received * dispatch_row),
            (f"{name}, combine send (bf16; backward reuses it)", received * 2 * h),
            (f"{name}, combine receive (bf16; backward reuses it)", sent * 2 * h)]


def communication_buffers(model: ModelConfig, layout: Layout,
                          settings: CommSettings = CommSettings()) -> list[tuple[str, Expr]]:
    """Every communication buffer of ``model`` under ``layout``, held from
    start-up: NCCL's staging per communicator and the gradient bucket
    (:meth:`CommSettings.items`) and the expert-parallel all-to-all's send and
    receive buffers (:func:`expert_all_to_all_staging`). The bill's verdict
    and the timeline both count these."""
    return ([(name, Integer(size)) for name, size in settings.items(layout)]
            + expert_all_to_all_staging(model, layout))


def _tensor(name, shape, dtype, split, split_dim, note=""):
    return SavedTensor(name, shape, dtype, split, split_dim, Group.BODY, TRANSIENT_SOURCE, note)


def work_tensors(ffn: Expr) -> Inventory:
    """The kernel work tensors of one layer and of the loss, unsharded.

    Forward: ``attention/scores`` — the raw Q·Kᵀ (b, a, s, s), the softmax's
    input, freed once the softmax output exists. MLP backward: the incoming
    gradient dY and outgoing dX (s, b, h), and the gradients of the two
    f-wide intermediates (GeLU output and input) — "与它同形状的中间量梯度"
    (seed 004 §06.3). Attention backward: dY, dX, the gradients of the
    probabilities and of the scores (b, a, s, s each, no FlashAttention) and
    dQ, dK, dV. Loss (the eager kernel): the logits (bf16, the whole vocabulary — transformers' tensor
    parallelism gathers them, ``output.loss_work``) and the fp32 gradient of the logits. (The fp32 log-softmax the
    loss keeps for backward is a saved tensor of the output side,
    ``models.architectures.output``: the loss phase holds it with the final
    norm's and the logits' inputs.)
    """
    head = h / a
    return Inventory((
        _tensor("forward/attention/scores", (b, a, s, s), "bf16", Axis.TENSOR, 1, "Q·Kᵀ before the softmax"),
        _tensor("backward/mlp/grad_output", (s, b, h), "bf16", Axis.SEQUENCE, 0, "dY entering the MLP block"),
        _tensor("backward/mlp/grad_fc2_input", (s, b, ffn), "bf16", Axis.TENSOR, 2, "d(GeLU output)"),
        _tensor("backward/mlp/grad_gelu_input", (s, b, ffn), "bf16", Axis.TENSOR, 2, "d(GeLU input): dH"),
        _tensor("backward/mlp/grad_input", (s, b, h), "bf16", Axis.SEQUENCE, 0, "dX leaving the MLP block"),
        _tensor("backward/attention/grad_output", (s, b, h), "bf16", Axis.SEQUENCE, 0, "dY entering attention"),
        _tensor("backward/attention/grad_probs", (b, a, s, s), "bf16", Axis.TENSOR, 1, "dP"),
        _tensor("backward/attention/grad_scores", (b, a, s, s), "bf16", Axis.TENSOR, 1, "dS"),
        _tensor("backward/attention/grad_query", (s, b, a, head), "bf16", Axis.TENSOR, 2, "dQ"),
        _tensor("backward/attention/grad_key", (s, b, a, head), "bf16", Axis.TENSOR, 2, "dK"),
        _tensor("backward/attention/grad_value", (s, b, a, head), "bf16", Axis.TENSOR, 2, "dV"),
        _tensor("backward/attention/grad_input", (s, b, h), "bf16", Axis.SEQUENCE, 0, "dX leaving the layer"),
        _tensor("loss/logits", (s, b, V), "bf16", Axis.NONE, None,
                "output layer result, the whole vocabulary (gathered under TP)"),
        _tensor("loss/grad_logits_fp32", (s, b, V), "fp32", Axis.NONE, None, "d(loss)/d(logits), fp32"),
    ))


def layer_work_tensors(saved: Inventory, loss: str = "eager", output_weight_grad: bool = True) -> Inventory:
    """The kernel work tensors of one layer and of the loss, from the layer's
    saved tensors (any architecture), unsharded.

    The rule that gives :func:`work_tensors` for the GPT layer: the raw Q·Kᵀ
    scores in forward and dP, dS in backward only when the layer saves an
    s×s tensor (no fused kernel: a fused kernel keeps them in SRAM tiles);
    in the MLP backward, dY and dX and the gradient of every float
    intermediate of the MLP/MoE block that TP or EP splits and that is not
    h wide (GPT: the GeLU input and output; LLaMA: gate, SiLU, up and the
    down projection's input; MoE: each expert's and shared expert's
    intermediates, all experts at once — an upper bound, autograd frees
    each expert's once its backward is done), in reverse order of forward;
    in the attention backward dY, dX and dQ, dK, dV of the saved Q, K, V's
    shapes (GQA: K and V at g heads). The loss: the kernel ``loss``'s work tensors
    (:func:`symbolic.models.architectures.output.loss_work`; ``eager`` as :func:`work_tensors`), with
    ``output_weight_grad`` False when the output layer is frozen (LoRA).

    A layer with routed experts also has the dispatch's forward buffers
    (Megatron-Core ``token_dispatcher.MoEAlltoAllTokenDispatcher``): the
    permuted tokens, each token once per chosen expert — [s·b·k, h], the
    rank's own tokens (/t under SP) — and, with expert parallelism, the
    all-to-all's output of the same size under balanced routing, both freed
    once the expert-TP all-gather has produced the experts' input (without
    expert parallelism :func:`without_all_to_all` drops the second). The
    combine mirrors them on the way back; they are not counted twice.
    """
    explicit = any(term.shape[-2:] == (s, s) for term in saved)
    hidden = (s, b, h)
    terms = []
    if explicit:
        terms.append(_tensor("forward/attention/scores", (b, a, s, s), "bf16", Axis.TENSOR, 1,
                             "Q·Kᵀ before the softmax"))
    if any(x.split is Axis.EXPERT for x in saved):
        terms += [_tensor(f"forward/moe/{name}", (s, b, top_k, h), "bf16", Axis.SEQUENCE, 0, note)
                  for name, note in (("permuted_tokens", "permute: each token once per chosen expert"),
                                     ("received_tokens", "the EP all-to-all's output (balanced: as many rows)"))]
    terms.append(_tensor("backward/mlp/grad_output", hidden, "bf16", Axis.SEQUENCE, 0, "dY entering the MLP block"))
    for x in reversed(saved.terms):
        if (not x.name.startswith("attention/") and x.dtype not in ("mask", "int64")
                and x.split in (Axis.TENSOR, Axis.EXPERT) and x.shape[-1] != h):
            name = x.name.split("/", 1)[1].replace("/", "_")
            terms.append(_tensor(f"backward/mlp/grad_{name}", x.shape, x.dtype, x.split, x.split_dim,
                                 f"d({x.name})"))
    terms.append(_tensor("backward/mlp/grad_input", hidden, "bf16", Axis.SEQUENCE, 0, "dX leaving the MLP block"))
    terms.append(_tensor("backward/attention/grad_output", hidden, "bf16", Axis.SEQUENCE, 0,
                         "dY entering attention"))
    if explicit:
        terms += [_tensor("backward/attention/grad_probs", (b, a, s, s), "bf16", Axis.TENSOR, 1, "dP"),
                  _tensor("backward/attention/grad_scores", (b, a, s, s), "bf16", Axis.TENSOR, 1, "dS")]
    for part, label in (("query", "dQ"), ("key", "dK"), ("value", "dV")):
        x = saved[f"attention/{part}"]
        terms.append(_tensor(f"backward/attention/grad_{part}", x.shape, "bf16", x.split, x.split_dim, label))
    terms.append(_tensor("backward/attention/grad_input", hidden, "bf16", Axis.SEQUENCE, 0, "dX leaving the layer"))
    terms += output.loss_work(loss, output_weight_grad)
    return Inventory(tuple(terms))


def without_all_to_all(work: Inventory) -> Inventory:
    """No expert parallelism: no all-to-all, the permuted tokens go straight to the expert-TP gather."""
    return Inventory(tuple(x for x in work if x.name != "forward/moe/received_tokens"), work.applied)
