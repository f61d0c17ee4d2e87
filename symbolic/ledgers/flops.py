"""FLOPs: the matmuls of the inventory, forward and backward, summed.

Conventions (Korthikanti et al. 2022 §6.3; Chowdhery et al. 2022 App. B):
*model FLOPs* count the work the model needs — one forward and one backward,
backward = 2 × forward; *hardware FLOPs* also count what recompute repeats.
Only matmuls are counted (softmax, norms, element-wise ops are lower order),
as in Narayanan et al. 2021 §5.1.
"""
from __future__ import annotations

from sympy import Add, Expr

from ..core.dims import L, b, s
from ..core.tensors import Group, Inventory
from ..layout.choices import OP_SAC, RECOMPUTE_POLICIES
from ..models.architectures import gpt


def _forward(inventory: Inventory, keep) -> Expr:
    return Add(*((L if mm.scope == "layer" else 1) * mm.forward_flops for mm in inventory if keep(mm)))


def forward(inventory: Inventory | None = None) -> Expr:
    """Forward FLOPs of one micro-batch through all L layers and the logits."""
    inventory = gpt.matmuls() if inventory is None else inventory
    return _forward(inventory, lambda mm: True)


def model_training(inventory: Inventory | None = None) -> Expr:
    """Model FLOPs of one training micro-batch: forward + backward = 3 × forward."""
    inventory = gpt.matmuls() if inventory is None else inventory
    return Add(*((L if mm.scope == "layer" else 1) * (mm.forward_flops + mm.backward_flops) for mm in inventory))


def recompute_extra(recompute: str, inventory: Inventory | None = None) -> Expr:
    """FLOPs recompute adds: full recompute repeats every layer's forward
    (Narayanan Eq 3's 4×); selective repeats the attention core, Q·Kᵀ and
    scores·V (Korthikanti §5); torchtitan's per-op policy (``op-sac``) every second weight matmul of the
    layer (:func:`symbolic.layout.op_sac.recomputed`; an inventory already marked by
    :func:`~symbolic.layout.op_sac.mark` — one matmul taken alone — is read by its marks). The logits
    are never recomputed."""
    if recompute not in RECOMPUTE_POLICIES:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE_POLICIES)}, not {recompute!r}")
    inventory = gpt.matmuls() if inventory is None else inventory
    if recompute == "none":
        return Add()
    if recompute == "full":
        return _forward(inventory, lambda mm: mm.scope == "layer")
    if recompute == OP_SAC:
        from ..layout.op_sac import mark
        if not any(mm.group is Group.RECOMPUTED for mm in inventory):
            inventory = mark(inventory)
        return _forward(inventory, lambda mm: mm.scope == "layer" and mm.group is Group.RECOMPUTED)
    return _forward(inventory, lambda mm: mm.scope == "layer" and mm.group is Group.ATTENTION_CORE)


def hardware_training(recompute: str = "none", inventory: Inventory | None = None) -> Expr:
    """Hardware FLOPs of one training micro-batch: model FLOPs + recompute."""
    return model_training(inventory) + recompute_extra(recompute, inventory)


def per_token(expr: Expr) -> Expr:
    """FLOPs per token of a per-micro-batch count: divide by b·s tokens."""
    return expr / (b * s)


def kaplan_forward_per_token(inventory: Inventory | None = None) -> Expr:
    """Forward FLOPs per token as Kaplan et al. 2020 count them (Eq 2.2, Table 1).

    Weight matmuls of the layers (2 FLOPs per weight: 2N) plus the attention
    products under a causal mask, where a token attends on average to about
    half the context: half of the full s×s count. Embeddings and logits are
    left out, as Kaplan's N leaves them out. Condition: d_attn = d_model = h.
    """
    inventory = gpt.matmuls() if inventory is None else inventory
    weights = _forward(inventory, lambda mm: mm.scope == "layer" and mm.weight)
    attention = _forward(inventory, lambda mm: mm.scope == "layer" and not mm.weight) / 2
    return per_token(weights + attention)


def capacity_padding(inventory: Inventory, shards: Expr, capacity: Expr | None = None) -> Inventory:
    """The routed experts' matmuls over their padded rows only (Megatron-Core's
    ``moe_pad_expert_input_to_capacity`` with ``moe_expert_capacity_factor`` C_f; the
    alltoall dispatcher's ``preprocess``, ``moe/token_dispatcher.py`` at d98e8a6).

    Each of the ``shards`` ranks a micro-batch's s·b tokens are split over (c·t under sequence
    parallelism, c without: the ranks whose routing maps differ) routes N = s·b/shards tokens
    and sends every expert exactly ``capacity = ceil(N·k/E·C_f)`` rows (``get_capacity``),
    real or zero-padded; the experts' GEMMs run on all of them. Per expert and micro-batch:
    shards·ceil(s·b·k·C_f/(shards·E)) rows against the balanced s·b·k/E of the inventory —
    the difference, (C_f − 1)·s·b·k/E when the capacity is whole, is hardware work, not model
    work (model FLOPs count the routed tokens). Exact, the ceiling included. Condition:
    balanced routing (no token dropped: C_f ≥ 1 covers every expert's share)."""
    from dataclasses import replace

    from sympy import ceiling

    from ..core.dims import C_f, E, k

    capacity = C_f if capacity is None else capacity
    padded = shards * ceiling(s * b * k * capacity / (shards * E))
    return Inventory(tuple(replace(mm, name=f"{mm.name} (padding to capacity)", M=padded - mm.M,
                                   note="zero rows padded to each expert's capacity ceil(N·k/E·C_f)")
                           for mm in inventory if mm.name.startswith("layer/moe/experts_")))
