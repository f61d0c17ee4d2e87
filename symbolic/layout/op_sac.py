"""torchtitan's per-op selective activation checkpointing as a recompute policy: ``--recompute op-sac``.

Read at pytorch/torchtitan 238fa99 — the last commit whose train configs are the TOML files
``--from torchtitan`` reads (:data:`~symbolic.layout.launch.reader.TORCHTITAN_COMMIT`) — in
``torchtitan/distributed/activation_checkpoint.py`` (``_apply_op_sac``: each transformer block wrapped by
``checkpoint_wrapper`` with ``create_selective_checkpoint_contexts`` and a policy function,
``early_stop=False``) and ``torchtitan/models/llama3/infra/parallelize.py`` (``_op_sac_save_list``). In each
block's forward (the mm counter is a fresh ``defaultdict(int)`` per block context):

* ``aten.mm``: the n-th of the block is saved when n is odd and recomputed when n is even ("saves output
  of all compute ops, except every second mm"); ``per_op_sac_force_recompute_mm_shapes_by_fqns``
  (default ``["moe.router.gate"]``) matches no linear layer of a dense block;
* saved whatever their place: the SDPA kernels' outputs (flash, efficient, cuDNN, math, overrideable),
  ``_c10d_functional.reduce_scatter_tensor`` (the row-parallel outputs under sequence parallelism),
  ``aten.max`` (float8 scales; no float8 here), flex attention, compiled regions;
* everything else is recomputed in backward: norms, RoPE, SiLU, the gate·up product, the residual adds,
  and the collectives not in the list — tensor parallelism's all-gathers (SP) or all-reduces (no SP).

b5bcd76c's ``SelectiveAC`` (torchtitan's Python configs) keeps the rule ("recomputes every second
matmul") over a wider list (``torch._functorch.partitioners.get_default_op_list``'s compute-intensive
ops, ``aten.linear``, ``topk``, ``all_to_all_single``): on a dense, bias-free block with SDPA it saves
the same outputs.

So what one GPU keeps per layer follows from the layer's op list (:func:`op_selective_checkpoint`):
the block's input, as the checkpoint keeps it; the outputs of the odd weight matmuls in forward order
(a LLaMA layer's wq, wk, wv, wo, w1, w3, w2 — ``w2(silu(w1(x)) * w3(x))`` runs w1 before w3: wq, wv,
w1, w2 saved; wk, wo, w3 recomputed); the attention kernel's output and log-sum-exp; under SP the
two reduce-scattered outputs. And what recompute costs (:func:`recomputed`): the even weight
matmuls' forward once more — the attention kernel is not re-run. Not counted, named: the flash
kernel's two 0-dim int64 RNG tensors (seed and offset; 16 B of data per layer, at most 1 KiB with the
CUDA caching allocator's 512-B blocks).

Conditions: the attention is one SDPA kernel (the layer saves a log-sum-exp, not the s×s scores: with
explicit attention the scores' bmm and softmax would be recomputed, a case not modelled); every
weight matmul of the layer is one ``aten.mm`` over the b·s tokens (no bias: ``addmm`` is not in the
238fa99 list; no routed experts: grouped GEMMs and the router's forced recompute are not modelled),
listed in forward order by the layer's matmul inventory.
"""
from __future__ import annotations

from dataclasses import replace

from sympy import Expr, Integer

from ..core.dims import b, s
from ..core.tensors import Axis, Group, Inventory, SavedTensor

#: pytorch/torchtitan at the commit read (the TOML configs' last; the reader's TORCHTITAN_COMMIT).
TORCHTITAN_OP_SAC = ("pytorch/torchtitan 238fa99 distributed/activation_checkpoint.py (_apply_op_sac), "
                     "models/llama3/infra/parallelize.py (_op_sac_save_list)")


#: The saved tensors of the layer's inventory (no recompute) that are a weight matmul's output storage
#: itself: SiLU keeps the gate projection's output as its input; SDPA reads V as a view of the value
#: projection's output (HF transformers 5.24.0 ``LlamaAttention``: ``.view(...).transpose(1, 2)``, no
#: copy). When the policy saves that matmul's output, re-running the block hands the cached tensor back:
#: the term is not re-created in the recompute window (``ledgers.peak.step_terms``).
CACHED_STORAGE = {"layer/mlp/gate": "mlp/gate_output", "layer/attention/value": "attention/value"}


def cached_names(matmuls: Inventory) -> frozenset[str]:
    """The saved tensors of the layer (:data:`CACHED_STORAGE`) that are outputs the policy caches."""
    again = recomputed(matmuls)
    return frozenset(name for mm, name in CACHED_STORAGE.items()
                     if mm in matmuls.names() and mm not in again)


def weight_matmuls(matmuls: Inventory) -> tuple:
    """The layer's weight matmuls in forward order (the inventory's order): the ``aten.mm`` calls the
    policy counts. Refuses a matmul that is not one mm over the b·s tokens (experts' grouped GEMMs)."""
    out = tuple(mm for mm in matmuls if mm.scope == "layer" and mm.weight)
    for mm in out:
        if mm.batch != 1 or mm.M != b * s:
            raise ValueError(f"op-sac counts one aten.mm per weight matmul over the b·s tokens; {mm.name} is "
                             f"{mm.batch} × ({mm.M} × {mm.K}) · ({mm.K} × {mm.N}) (routed experts are not modelled)")
    return out


def recomputed(matmuls: Inventory) -> frozenset[str]:
    """The names of the weight matmuls the policy re-runs in backward: the even ones (2nd, 4th, …) of the layer."""
    return frozenset(mm.name for n, mm in enumerate(weight_matmuls(matmuls), start=1) if n % 2 == 0)


def mark(matmuls: Inventory) -> Inventory:
    """``matmuls`` with the ones the policy recomputes in group :attr:`Group.RECOMPUTED`, so a matmul
    taken alone (the bill's and the time model's lines) still says whether it is re-run."""
    again = recomputed(matmuls)
    return matmuls.map(lambda mm: replace(mm, group=Group.RECOMPUTED) if mm.name in again else mm, "op_sac_mark")


def row_parallel(matmuls: Inventory) -> frozenset[str]:
    """The row-parallel weight matmuls: the last of each block (attention/…, mlp/…) with several — torchtitan's
    plan splits wq/wk/wv and w1/w3 by columns and wo and w2 by rows (``RowwiseParallel``, parallelize.py),
    as Megatron-LM does (Shoeybi et al. 2019 §3). Their outputs are partial sums, whole on each rank."""
    blocks: dict[str, list[str]] = {}
    for mm in weight_matmuls(matmuls):
        blocks.setdefault(mm.name.split("/")[1], []).append(mm.name)
    return frozenset(names[-1] for names in blocks.values() if len(names) > 1)


def op_selective_checkpoint(inventory: Inventory, layer_input: Inventory, matmuls: Inventory,
                            tensor_ways: Expr = Integer(1), sequence_parallel: bool = False,
                            dtype: str = "bf16") -> Inventory:
    """What one GPU keeps of a layer under torchtitan's per-op policy (module docstring), from the layer's
    saved tensors already split by the strategy (``inventory``: TP/SP and the activation dtype applied)
    and its matmuls (``matmuls``, forward order). Term by term:

    * the layer's input (``layer_input``: what full recompute keeps of ``inventory``, ``strategies.full_recompute``
      — the checkpoint holds the block's input as it arrives: ``dtype``, sequence-sharded under SP);
    * ``<block>/<matmul>_mm_output`` for each odd weight matmul: (s, b, N) in ``dtype``; a column-parallel
      one split t ways, a row-parallel one whole (its output is the partial sum before the reduction);
    * ``attention/sdpa_output`` (the attention kernel's output, the size of the output projection's input)
      and ``attention/logsumexp`` (fp32 per row and head), split over the heads;
    * with sequence parallelism, ``<block>/reduce_scatter_output`` for each row-parallel matmul: (s/t, b, h).
    """
    names = inventory.names()
    if "attention/logsumexp" not in names or "attention/projection_input" not in names:
        raise ValueError("op-sac saves the SDPA kernel's output: the layer's attention must be the fused kernel "
                         "(it saves a log-sum-exp), not the explicit one")
    rows = row_parallel(matmuls)
    again = recomputed(matmuls)  # the policy's parity rule, in one place
    kept = list(layer_input)
    for n, mm in enumerate(weight_matmuls(matmuls), start=1):
        if mm.name in again:
            continue
        base = mm.name.removeprefix("layer/")
        if mm.name in rows:
            term = SavedTensor(f"{base}_mm_output", (s, b, mm.N), dtype, Axis.NONE, None, Group.BODY,
                               TORCHTITAN_OP_SAC, f"matmul {n} of the layer (odd: saved); row-parallel: the partial "
                               "sum, whole on every rank")
        else:
            term = SavedTensor(f"{base}_mm_output", (s, b, mm.N), dtype, Axis.TENSOR, 2, Group.BODY,
                               TORCHTITAN_OP_SAC, f"matmul {n} of the layer (odd: saved)").shard(tensor_ways)
        kept.append(term)
    kept.append(replace(inventory["attention/projection_input"], name="attention/sdpa_output", source=TORCHTITAN_OP_SAC,
                        note="the SDPA kernel's output (saved op)"))
    kept.append(replace(inventory["attention/logsumexp"], source=TORCHTITAN_OP_SAC,
                        note="the SDPA kernel's log-sum-exp (saved op)"))
    if sequence_parallel:
        for name in sorted(rows, key=[mm.name for mm in matmuls].index):
            mm = matmuls[name]
            kept.append(SavedTensor(f"{mm.name.split('/')[1]}/reduce_scatter_output", (s, b, mm.N), dtype,
                                    Axis.SEQUENCE, 0, Group.BODY, TORCHTITAN_OP_SAC,
                                    "the row-parallel output reduce-scattered along the sequence (saved op)")
                        .shard(tensor_ways))
    return Inventory(tuple(kept), inventory.applied + ("op_selective_checkpoint",))
