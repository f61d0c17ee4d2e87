"""The bill as plain data and JSON: what ``bill --json`` prints, without the tables' library.

``render/terminal.py`` re-exports everything here; ``bill --json`` and the API's ``Bill`` import this
module alone, so they do not import rich (its import was a fifth of a cold cached ``bill --json``).
"""
from __future__ import annotations

import dataclasses
import json

from ..bill.evaluate import Bill, Line
from ..core.units import as_fraction
from ..models.config import seq_origin

#: ledger -> (title, kind of value, scope of the numbers)
TITLES = {
    "params": ("PARAMETERS", "params", "whole model"),
    "model_states": ("MODEL STATES", "bytes", "per GPU"),
    "activations": ("ACTIVATIONS", "bytes", "per GPU, stage accounted"),
    "flops": ("FLOPS", "flops", "per iteration, all GPUs, hardware (with recompute)"),
    "output_side": ("OUTPUT SIDE", "bytes", "per GPU on the last pipeline stage, one micro-batch; "
                    "in the verdict, not in the papers' total"),
    "communication": ("COMMUNICATION BUFFERS", "bytes", "per GPU, held from start-up; in the verdict"),
    "verdict": ("VERDICT: PEAK OF THE STEP", "bytes", "per GPU on the busiest stage, at its peak instant"),
    "cpu_memory": ("CPU MEMORY (offloaded)", "bytes", "per GPU's process, in host memory; not in the GPU's total"),
}

#: the unit of each kind of value in the JSON lines
UNITS = {"params": "params", "bytes": "B", "flops": "FLOPs"}


def _kind(ledger: str) -> str:
    return TITLES[ledger][1] if ledger in TITLES else "bytes" if ledger.endswith("bytes") else "count"


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, str, float)):
        return value
    if isinstance(value, (tuple, list)):  # a layout's recompute modules
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):  # a lever's entry
        return {key: _jsonable(item) for key, item in value.items()}
    value = as_fraction(value)
    return value.numerator if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def render_json(bill: Bill) -> str:
    """The bill as JSON: exact integers (or "p/q" strings) under stable keys.

    Keys are only ever added, never renamed (see the README's table).
    """
    return json.dumps(bill_data(bill), indent=2, ensure_ascii=False)


def bill_data(bill: Bill) -> dict:
    """The bill as plain data: what ``bill --json`` prints (see :func:`render_json`)."""
    model_config = {f.name: getattr(bill.model, f.name) for f in dataclasses.fields(bill.model)}
    model_config["approximations"] = list(bill.model.approximations)
    # The family fields (learned table rows, composed recipe, its letters' values) appear only when set,
    # so the JSON of a model without them is as it was.
    for key in ("position_table", "recipe", "dims", "max_positions"):
        value = model_config.pop(key)
        if value:
            model_config[key] = dict(value.key()) if key == "recipe" else dict(value) if key == "dims" \
                else value
    data = {
        "model": bill.model.name,
        "values": {k: _jsonable(value) for k, value in bill.values.items()},  # C_f: "p/q" when not whole
        "layout": {k: _jsonable(getattr(bill.layout, k)) for k in bill.layout.__dataclass_fields__},
        "strategy": bill.strategy,
        **{key: _jsonable(value) for key, value in bill.totals.items()},
        "lines": [_line_data(line) for line in bill.lines],
        "notes": bill.notes,
        "not_counted": [{"item": item, "estimate_bytes": _jsonable(size), "source": source}
                        for item, size, source in bill.not_counted],
        "fixes": [_jsonable(fix.as_dict()) for fix in getattr(bill, "fixes", [])],
        "fix_policy": getattr(bill, "fix_policy", ""),
        "approximations": list(bill.model.approximations),
        "model_config": model_config,
    }
    origin = seq_origin(bill.model, bill.layout.seq)
    if origin:  # s was not given: where the billed one comes from (the layout line says it)
        data["layout"]["seq_from"] = origin
    if getattr(bill, "gpu", None) is not None:  # the GPU the memory and the step time are for (--gpu)
        data["gpu"] = bill.gpu.as_dict()
    if getattr(bill, "preset", None) is not None and bill.preset.fields:  # what --framework filled, if anything
        # (layout.frameworks.PresetChoice; the TIME section names the preset and its settings either way)
        data["framework_preset"] = _jsonable(bill.preset.as_dict())
    return data


def _line_data(line: Line) -> dict:
    data = {"ledger": line.ledger, "name": line.name, "formula": line.formula, "value": _jsonable(line.value),
            "unit": UNITS.get(_kind(line.ledger), ""), "source": line.source, "condition": line.condition}
    if line.micro_batches:
        # formula == formula_per_micro_batch × micro_batches
        data.update(formula_per_micro_batch=line.per_micro_batch, micro_batches=line.micro_batches)
    return data
