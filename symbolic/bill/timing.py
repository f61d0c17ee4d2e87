"""The step time of one bill: the communication ledger and the time model at one layout.

``symbolic.ledgers.time`` prices arrays of layouts; this module gives it the
bill's model and layout — the same inventories (:func:`symbolic.bill.derive.inventories`),
the same recompute-as-the-FLOPs-see-it, the same Ψ (hand-filled or counted).
"""
from __future__ import annotations

from functools import lru_cache

from ..layout.layout import Layout
from ..ledgers.hardware import Hardware
from ..ledgers.time import Overlap, StepTime, TimeDerivation, derive_time, price
from ..models.config import ModelConfig
from .evaluate import structure


@lru_cache(maxsize=None)
def time_derivation(model_structure: tuple, sp: bool, recompute: str, zero: int, pipeline: bool,
                    interleaved: bool, context_parallel: bool, optimizer: str, dtype: str) -> TimeDerivation:
    """The time model's expressions for a model structure and the layout's discrete choices."""
    from .derive import architecture_inventories, fused_backward_recompute, recompute_for_flops

    parameters, saved, matmuls = architecture_inventories(*model_structure)
    return derive_time(parameters, saved, matmuls, sp=sp, recompute=recompute,
                       flops_recompute=recompute_for_flops(recompute, saved), zero=zero, pipeline=pipeline,
                       interleaved=interleaved, context_parallel=context_parallel, optimizer=optimizer,
                       dtype=dtype, tied=model_structure[2],
                       fused_backward=fused_backward_recompute(saved, matmuls))


def derivation_for(model: ModelConfig, layout: Layout) -> TimeDerivation:
    return time_derivation(structure(model), layout.sp, layout.recompute, layout.zero, layout.pp > 1,
                           layout.interleave > 1, layout.cp > 1, layout.optimizer, layout.dtype)


def letters(model: ModelConfig, layout: Layout, params_hand: int | None = None, params_count: int | None = None):
    """The dimension values of the bill, with B (sequences per iteration) and Ψ."""
    values = layout.values(model)
    values["B"] = layout.global_batch or layout.micro_batch * layout.dp
    if params_hand is not None:
        values["Psi"] = params_hand
    elif params_count is not None:
        values["Psi"] = params_count
    return values


def step_time(model: ModelConfig, layout: Layout, hardware: Hardware, *, overlap: Overlap = Overlap(),
              gpus_per_node: int | None = None, params_hand: int | None = None,
              params_count: int | None = None) -> StepTime:
    """The priced iteration of ``model`` under ``layout`` on ``hardware``, every factor kept."""
    from ..core.numeric import exact
    from ..ledgers import params as params_ledger

    derivation = derivation_for(model, layout)
    if params_count is None and params_hand is None:
        from .derive import inventories
        params_count = int(exact(params_ledger.count(inventories(model)[0]), layout.values(model)))
    values = letters(model, layout, params_hand, params_count)
    numbers = [float(exact(expr, values)) for expr in derivation.expressions()]
    return price(derivation, numbers, values, hardware, overlap=overlap, gpus_per_node=gpus_per_node,
                 gemm_dtype="fp8" if layout.dtype == "fp8" else "bf16", detail=True)
