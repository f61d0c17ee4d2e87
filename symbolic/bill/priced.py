"""The bill as ``symbolic bill`` and :func:`symbolic.bill` give it: evaluated from its
(cached) derivation, with the levers that would make it fit when it does not, and the
step time of the layout on a GPU kind — one path for the CLI and the Python API."""
from __future__ import annotations

from ..layout.layout import Layout
from ..ledgers.hardware import Hardware
from ..ledgers.time import Overlap
from ..models.config import ModelConfig
from .cache import derivation
from .evaluate import Bill, evaluate
from .levers import POLICY, what_would_fit
from .timing import step_time


def priced_bill(model: ModelConfig, layout: Layout, hardware: Hardware, *, overlap: Overlap = Overlap(),
                gpus_per_node: int | None = None, params_hand: int | None = None, gpu_memory: int | None = None,
                cpu_memory: int | None = None):
    """(the evaluated :class:`Bill` with its ``fixes``, the :class:`StepTime`) of ``model`` under ``layout``
    (its precision recipe checked against ``hardware``: ``layout.precision.on_hardware``)."""
    from ..layout.precision import on_hardware

    layout = on_hardware(layout, hardware)
    bill: Bill = evaluate(derivation(model, layout, params_hand), model, layout, params_hand, gpu_memory, cpu_memory)
    step = step_time(model, layout, hardware, overlap=overlap, gpus_per_node=gpus_per_node,
                     params_hand=params_hand, params_count=bill.totals["params"])

    def price(changed: Layout) -> float:
        """The modelled step time of a lever's layout on the same hardware: the fixes' order within a tier."""
        if changed == layout:
            return step.step_seconds
        return step_time(model, changed, hardware, overlap=overlap, gpus_per_node=gpus_per_node,
                         params_hand=params_hand, params_count=bill.totals["params"]).step_seconds

    bill.fixes = what_would_fit(bill, params_hand, price=price)  # empty when it fits (or no --gpu-memory)
    bill.fix_policy = POLICY
    return bill, step
