"""A plan's step times: the bill's time derivation (:func:`symbolic.bill.timing.time_derivation`) of each
group, read as one numpy function (:func:`time_function`) and priced over arrays of layouts by
:func:`symbolic.ledgers.time.price` (:func:`price_groups`: groups with equal shells in one call); the
pipeline bubble, and the step's largest part in words (:func:`time_binding`).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Mapping

import numpy as np

from ..layout.layout import Layout
from ..ledgers.hardware import Hardware
from ..ledgers.time import Overlap, price
from .formulas import TIME_NAMES, Group, _array_function


def _time_key(group: "Group") -> tuple:
    """The arguments of :func:`symbolic.bill.timing.time_derivation` for ``group`` (the bill's key)."""
    # a schedule's chunks per rank as the bill's key reads them (layout.interleave > 1: the V shapes' two)
    return (group.structure, bool(group.sp), group.recompute, group.zero, group.schedule != "none",
            group.schedule in ("interleaved", "zb-v", "dualpipev"), group.cp, group.optimizer, group.dtype, group.ep,
            group.lora[:2] if group.lora else ())


def _checked_time(text: str):
    """A stored time derivation (``bill.timing.StoredTime``) that reads as arithmetic in the plan's
    letters (:func:`_array_function`); anything else raises, and the entry is derived afresh."""
    from ..bill.timing import StoredTime
    stored = StoredTime.from_json(text)
    _array_function(tuple(stored.formulas), (), TIME_NAMES)
    return stored


@lru_cache(maxsize=None)
def time_function(group: "Group"):
    """(derivation's shell, numpy function of a mapping of :data:`TIME_NAMES` returning every
    expression the time model prices) for one discrete choice: the bill's
    :func:`symbolic.bill.timing.time_derivation`, as the text the bill's cache holds (shared with the
    bill's entries; derived with sympy on a miss), read by the guarded reader into one function."""
    from ..bill.timing import stored_for

    stored = stored_for(_time_key(group), _checked_time)
    return stored.shell(), _array_function(tuple(stored.formulas), (), TIME_NAMES)


def _time_inputs(group: "Group", values: Mapping[str, object], sequences):
    """(derivation's shell, the numbers :func:`~symbolic.ledgers.time.price` reads, its letters) of arrays
    of layouts sharing ``group`` (``values`` as for :func:`sweep`, with Psi set; ``sequences``: B per layout)."""
    derivation, fn = time_function(group)
    vals = dict(values, B=np.asarray(sequences, dtype=np.float64))
    numbers = fn({name: vals.get(name, 1.0) for name in TIME_NAMES})
    letters = {k: vals[k] for k in ("t", "p", "d", "c", "v", "b", "B", "s")}
    if group.uneven:  # the slowest of the uneven stages paces the step (ledgers.time.pacing_stage)
        letters.update({k: vals[k] for k in ("L", "L_1", "L_p")})
    return derivation, list(numbers), letters


def time_sweep(group: "Group", values: Mapping[str, object], sequences, hardware: Hardware, overlap: Overlap,
               gpus_per_node: int, gemm_dtype: str = "bf16"):
    """The step time of arrays of layouts sharing ``group`` (``values`` as for :func:`sweep`, with
    Psi set; ``sequences``: B per layout)."""
    derivation, numbers, letters = _time_inputs(group, values, sequences)
    # The weight GEMMs at the FP8 peak when the layouts train in FP8 (Layout.gemm_dtype), else BF16: the
    # layout's dtype is how activations are stored, not the GEMMs' precision.
    return price(derivation, numbers, letters, hardware, overlap=overlap, gpus_per_node=gpus_per_node,
                 gemm_dtype=gemm_dtype)


def _joined(parts: list, sizes: list[int]) -> np.ndarray:
    """One float64 array of the groups' ``parts`` (arrays or scalars), each broadcast to its group's size
    (each written into its slice: numpy's assignment broadcasts and casts to float64 as ``asarray`` would,
    without a ``broadcast_to`` view per part — a plan joins ~2,000 of them)."""
    joined = np.empty(sum(sizes), dtype=np.float64)
    start = 0
    for x, size in zip(parts, sizes):
        joined[start:start + size] = x
        start += size
    return joined


def _indices_by_key(key: np.ndarray, where: np.ndarray | None = None):
    """The indices holding each distinct value of ``key`` (values ascending, indices ascending), among
    the indices ``where`` is true at (all without it): ``np.flatnonzero((key == value) & where)`` for each
    ``value`` of ``np.unique(key[where])``, from one stable sort instead of a pass over every layout per value."""
    among = np.arange(key.size) if where is None else np.flatnonzero(where)
    order = among[np.argsort(key[among], kind="stable")]   # stable: ascending indices within a value
    if not order.size:
        return
    cuts = np.flatnonzero(np.diff(key[order])) + 1
    for idx in np.split(order, cuts):
        yield idx


def price_groups(inputs: list, hardware: Hardware, overlap: Overlap, gpus_per_node: int, gemm_dtype: str = "bf16",
                 schedule=None):
    """:func:`time_sweep` of several groups at once: ``inputs`` holds each group's (layout indices,
    :func:`_time_inputs`). Groups whose derivations' shells are equal (the same compute lines, the same
    communication classes: 32 of GPT-3's 69 on 1024 GPUs) are priced by one call over their layouts
    together — :func:`~symbolic.ledgers.time.price` is element by element (each layout's seconds from its own
    numbers; the kernel tables' nearest shape found per distinct shape, ties by :data:`ledgers.kernels.TIE`),
    so every layout's doubles are those of its own group's call, with ~2 ms of Python per call saved.
    ``schedule``: a :class:`~symbolic.layout.schedules.Schedule` beyond Megatron's that every layout with p > 1
    runs (its bubble simulated per distinct p, v, m: ``ledgers.time.schedule_bubble``), None for Megatron's.
    Yields (layout indices, the priced :class:`~symbolic.ledgers.time.StepTime`)."""
    shells: dict = {}
    for idx, (derivation, numbers, letters) in inputs:
        shells.setdefault(repr(derivation), []).append((idx, derivation, numbers, letters))
    for members in shells.values():
        if len(members) == 1:
            idx, derivation, numbers, letters = members[0]
        else:
            sizes = [len(member[0]) for member in members]
            idx = np.concatenate([member[0] for member in members])
            derivation = members[0][1]
            numbers = [_joined([member[2][j] for member in members], sizes) for j in range(len(members[0][2]))]
            letters = {k: _joined([member[3][k] for member in members], sizes) for k in members[0][3]}
        yield idx, price(derivation, numbers, letters, hardware, overlap=overlap, gpus_per_node=gpus_per_node,
                         gemm_dtype=gemm_dtype, schedule=None if schedule is None else (schedule, None, None))


#: The step's parts in words (the time model's breakdown keys).
TIME_PARTS = {"elementwise": "element-wise kernels (HBM)", "tp_exposed": "TP communication",
              "cp_exposed": "CP ring exposed", "ep_exposed": "EP all-to-all", "pp_exposed": "pipeline sends",
              "bubble": "pipeline bubble", "dp_exposed": "DP reduce exposed", "zero3_exposed": "ZeRO-3 gathers exposed",
              "overlap_slowdown": "compute slowed by hidden collectives", "optimizer": "optimizer step"}


def time_binding(breakdown: Mapping[str, float], recompute_overhead: float, layout: Layout) -> str:
    """The largest part of the step beyond the model's GEMMs, as a share of the step."""
    step = sum(breakdown.values())
    if not step > 0:
        return "compute"
    parts = {TIME_PARTS[name]: value for name, value in breakdown.items() if name in TIME_PARTS}
    if recompute_overhead > 0:
        # With no recompute policy, the extra hardware FLOPs are the fused attention kernel's Q·Kᵀ recompute.
        what = "recompute FLOPs" if layout.recompute != "none" else "fused attention's recompute"
        parts[what] = breakdown["compute"] * recompute_overhead / (1 + recompute_overhead)
    name, value = max(parts.items(), key=lambda kv: kv[1])
    return "compute" if value <= 0 else f"{name} {value / step:.0%}"


def pipeline_bubble(pp, interleave, micro_batches):
    """Idle fraction of the ideal step: (p−1)/m for 1F1B, (p−1)/(v·m) interleaved
    (Narayanan et al. 2021 §2.2.1–2.2.2), m = micro-batches per pipeline per iteration."""
    pp = np.asarray(pp, dtype=np.float64)
    return np.where(pp > 1, (pp - 1) / (np.asarray(interleave) * np.asarray(micro_batches)), 0.0)


def step_seconds(flops_per_gpu, bubble, peak_flops: float = 312e12, utilisation: float = 0.5):
    """FLOPs-only estimate (the plan's model before the communication ledger; kept for the
    llm-analysis comparison, which has the same): hardware FLOPs per GPU / (peak ×
    utilisation) × (1 + bubble)."""
    return flops_per_gpu / (peak_flops * utilisation) * (1 + bubble)


#: The time model's columns a plan keeps per layout (seconds, and the throughput figures).
TIME_COLUMNS = ("compute", "elementwise", "tp_exposed", "cp_exposed", "ep_exposed", "pp_exposed", "bubble",
                "dp_exposed", "zero3_exposed", "overlap_slowdown", "optimizer", "model_tflops_per_gpu", "mfu")
