"""Strategies: functions from an inventory of saved tensors to another.

Each transformation states the condition it assumes and its source. They
compose: ``selective_recompute(sequence_parallel(tensor_parallel(inv)))`` is
Korthikanti Eq 6. A :class:`Strategy` names a composition so the CLI, the
claims and the bill all ask for the same thing.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr, Integer, sympify

from ..core.dims import L, T_e, c, p, s, t, v
from ..core.tensors import DTYPE_BYTES, Axis, Group, Inventory, SavedTensor
from .choices import FLOAT_ACTIVATION_DTYPES, RECOMPUTE


def tensor_parallel(inventory: Inventory, ways: Expr = t) -> Inventory:
    """Split the heads and the FFN width ``ways`` ways (Korthikanti §4.2.1).

    Tensors on the ``TENSOR`` axis shrink by ``ways``; the LayerNorm/dropout
    region (``SEQUENCE`` axis) stays whole on every GPU: the 10sbh of Eq 2.
    """
    return inventory.map(lambda x: x.shard(ways) if x.split is Axis.TENSOR else x, f"tensor_parallel({ways})")


def sequence_parallel(inventory: Inventory, ways: Expr = t) -> Inventory:
    """Split the LayerNorm/dropout region along the sequence (Korthikanti §4.2.2).

    Condition: runs on the tensor-parallel group, so ``ways`` is the TP size;
    the linear layers' inputs are kept sequence-sharded and all-gathered again
    in backward.
    """
    return inventory.map(lambda x: x.shard(ways) if x.split is Axis.SEQUENCE else x, f"sequence_parallel({ways})")


def context_parallel(inventory: Inventory, ways: Expr = c) -> Inventory:
    """Split every sequence over ``ways`` ranks (context parallelism: ring
    attention, Liu et al. 2023, arXiv 2310.01889; Megatron-LM's
    ``--context-parallel-size``; seed 004 §06.2).

    Each rank only ever holds its s/ways tokens: every shape entry that counts
    this rank's tokens — s, and the tokens routed to one expert T_e (∝ s) —
    is divided by ``ways``. The one exception is the key axis of a score
    matrix (b, a, s, s): a rank's queries attend to all s keys, so the score
    tensor shrinks once, along its query axis. Condition: ring-style
    attention, keys and values circulated among the ranks (not saved), the
    loss computed on each rank's own tokens.

    A shape rewrite, not a split axis: a term carries one parallel axis
    (``split``/``split_dim``, TP or SP), and context parallelism is a second
    split of the same tensors, so it composes with TP, SP and recompute by
    rewriting the logical shape (``Axis.CONTEXT`` stays unused).
    """
    local = {s: s / ways, T_e: T_e / ways}

    def shard(x: SavedTensor) -> SavedTensor:
        shape = list(x.shape)
        keys = len(shape) - 1 if len(shape) >= 2 and shape[-2:] == [s, s] else None
        shape = [entry if i == keys else sympify(entry).xreplace(local) for i, entry in enumerate(shape)]
        return replace(x, shape=tuple(shape))
    return inventory.map(shard, f"context_parallel({ways})")


def selective_recompute(inventory: Inventory) -> Inventory:
    """Drop the attention core — softmax output, its dropout mask and output —
    and recompute it in backward (Korthikanti §5): the 5as/h term goes."""
    return inventory.map(lambda x: None if x.group is Group.ATTENTION_CORE else x, "selective_recompute")


def full_recompute(inventory: Inventory, dtype: str | None = None) -> Inventory:
    """Keep only each layer's input, 2sbh, and recompute the layer in backward.

    Korthikanti Table 2 and §4.3: the kept input is *not* divided by t — that
    would need an extra all-gather — so it is stored whole, whatever sharding
    was applied before. Under context parallelism it *is* divided by c: a rank
    only ever has its own s/c tokens (:func:`context_parallel` rewrote the
    shape, which is kept). ``dtype``: the activation dtype the layer receives
    its input in — ``torch.utils.checkpoint`` keeps the input as it arrives,
    not what the layer's first op saves of it (HF's RMSNorm saves an fp32
    copy, 4sbh; checkpointing keeps the bf16 input, 2sbh: traced).
    """
    def keep_input(x: SavedTensor):
        if x.group is not Group.LAYER_INPUT:
            return None
        kept = replace(x, split=Axis.NONE, split_dim=None, sharded_by=Integer(1),
                       note=x.note + "; full recompute stores it whole (Korthikanti Table 2)")
        if dtype is not None and kept.dtype != dtype:
            kept = replace(kept, dtype=dtype, note=kept.note + f"; checkpointing keeps the {dtype} input")
        return kept
    return inventory.map(keep_input, "full_recompute")


def activation_dtype(inventory: Inventory, dtype: str) -> Inventory:
    """Store floating-point activations in ``dtype`` (masks keep 1 byte).

    The papers assume 2 bytes (bf16/fp16); fp32 training doubles every float term.
    Only terms in the default activation dtype (bf16) change: terms declared at
    a fixed dtype — 1-byte masks, fp32 norm statistics and softmax/log-sum-exp,
    int64 indices — keep theirs.
    """
    if dtype not in FLOAT_ACTIVATION_DTYPES:
        raise ValueError(f"activation dtype must be one of {', '.join(FLOAT_ACTIVATION_DTYPES)}, not {dtype!r}")
    return inventory.map(lambda x: replace(x, dtype=dtype) if x.dtype == "bf16" else x, f"activation_dtype({dtype})")


def interleave_in_flight(ways: Expr = p, chunks: Expr = v) -> Expr:
    """Micro-batch chunks in flight on the first stage of the interleaved 1F1B
    schedule (Narayanan et al. 2021 §2.2.2; Megatron-LM's
    ``forward_backward_pipelining_with_interleaving``): the first rank runs
    ``2(p-1) + (v-1)p`` warm-up forwards, then one more before its first
    backward, each over a chunk of L/(p·v) layers."""
    return 2 * (ways - 1) + (chunks - 1) * ways + 1


@dataclass(frozen=True)
class Strategy:
    """A composition of the strategies above.

    tensor_parallel: divide by t (1 means disabled). sequence_parallel: also
    shard the LayerNorm/dropout region by t (needs tensor_parallel).
    recompute: ``none``, ``selective`` or ``full``. dtype: the float
    activation dtype. pipeline: account for the first pipeline stage (the one
    holding the most micro-batches) instead of one replica of all L layers.
    in_flight: micro-batches in flight on that stage; ``None`` means the 1F1B
    schedule's p. interleaved: the interleaved schedule with v chunks per stage.
    context_parallel: split every sequence over c ranks (:func:`context_parallel`);
    composes with TP/SP (under SP each rank holds s/(c t)) and recompute.
    """

    tensor_parallel: bool = False
    sequence_parallel: bool = False
    recompute: str = "none"
    dtype: str = "bf16"
    pipeline: bool = False
    in_flight: Expr | None = None
    interleaved: bool = False
    context_parallel: bool = False

    def __post_init__(self) -> None:
        if self.recompute not in RECOMPUTE:
            raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, not {self.recompute!r}")
        if self.sequence_parallel and not self.tensor_parallel:
            raise ValueError("sequence parallelism runs on the tensor-parallel group: enable tensor parallelism too")
        if self.interleaved and not self.pipeline:
            raise ValueError("the interleaved schedule is a pipeline schedule: enable the pipeline too")
        if self.interleaved and self.in_flight is not None:
            raise ValueError("the interleaved schedule fixes the in-flight count; do not also give in_flight")
        if self.dtype not in FLOAT_ACTIVATION_DTYPES:
            raise ValueError(f"activation dtype must be one of {', '.join(FLOAT_ACTIVATION_DTYPES)}")

    def shard(self, inventory: Inventory) -> Inventory:
        """The dtype and the TP/SP sharding of this strategy, without recompute
        (what the output side — final norm, logits, loss — is subject to),
        and the context-parallel split of the sequence when on."""
        if self.context_parallel:
            inventory = context_parallel(inventory)
        if self.dtype != "bf16":
            inventory = activation_dtype(inventory, self.dtype)
        if self.tensor_parallel:
            inventory = tensor_parallel(inventory)
        if self.sequence_parallel:
            inventory = sequence_parallel(inventory)
        return inventory

    def apply(self, inventory: Inventory) -> Inventory:
        """The per-layer inventory one GPU holds under this strategy."""
        inventory = self.shard(inventory)
        if self.recompute == "selective":
            inventory = selective_recompute(inventory)
        elif self.recompute == "full":
            inventory = full_recompute(inventory, self.dtype)
        return inventory

    def layers_held(self) -> tuple[Expr, Expr]:
        """(micro-batch chunks in flight, layers per chunk) on the stage accounted.

        Without a pipeline: one micro-batch over all L layers. First stage of
        1F1B: ``m`` micro-batches (p by default) of L/p layers — Korthikanti
        §4.2.3's "p micro-batches in flight" make it L layers' worth (Eq 5).
        Interleaved: :func:`interleave_in_flight` chunks of L/(p v) layers.
        """
        if not self.pipeline:
            return Integer(1), L
        if self.interleaved:
            return interleave_in_flight(p, v), L / (p * v)
        return (p if self.in_flight is None else self.in_flight), L / p

    def describe(self) -> str:
        parts = []
        if self.tensor_parallel:
            parts.append("TP" + ("+SP" if self.sequence_parallel else ""))
        if self.context_parallel:
            parts.append("context parallel (s/c per rank)")
        parts.append({"none": "no recompute", "selective": "selective recompute",
                      "full": "full recompute"}[self.recompute])
        parts.append(f"{self.dtype} activations ({DTYPE_BYTES[self.dtype]} B/elem), 1 B masks")
        if self.pipeline:
            parts.append("first pipeline stage" + (", interleaved" if self.interleaved else ", 1F1B"))
        return ", ".join(parts)

