"""The bill as plain text and as JSON.

Each line shows its exact value with a unit, the symbolic formula it came
from (papers' letters), its source and its condition.
"""
from __future__ import annotations

import json

from sympy import Rational, sstr

from ..bill import Bill
from ..numeric import fmt

TITLES = {
    "params": ("PARAMETERS", "params", "whole model"),
    "model_states": ("MODEL STATES", "bytes", "per GPU"),
    "activations": ("ACTIVATIONS", "bytes", "per GPU, stage accounted"),
    "flops": ("FLOPS", "flops", "per iteration, all GPUs, hardware (with recompute)"),
}


def _value(value, kind: str) -> str:
    if kind == "bytes":
        return f"{fmt(value, 'GB')} ({fmt(value, 'GiB')})"
    if kind == "flops":
        return fmt(value, "TFLOPs")
    return f"{int(value):,} params"


def render_text(bill: Bill) -> str:
    model, layout, totals = bill.model, bill.layout, bill.totals
    v = bill.values
    out = [f"{model.name}: {model.source}",
           "  " + " ".join(f"{k}={v[k]}" for k in ("L", "h", "a", "V", "s", "f")) + "  |  "
           + " ".join(f"{k}={v[k]}" for k in ("b", "t", "p", "d", "v")),
           f"  activations: {layout.strategy().describe()}",
           ""]
    for ledger, (title, kind, scope) in TITLES.items():
        lines = bill.ledger(ledger)
        out.append(f"{title} ({scope})")
        width = max(len(line.name) for line in lines)
        for line in lines:
            out.append(f"  {line.name:<{width}}  {_value(line.value, kind):>30}  = {sstr(line.expr)}"
                       f"   [{line.source}{'; ' + line.condition if line.condition else ''}]")
        total = sum(line.value for line in lines)
        out.append(f"  {'total':<{width}}  {_value(total, kind):>30}")
        if ledger == "params":
            out.append(f"  Megatron Eq 2 (layers + tied embedding): {totals['params_eq2']:,} params "
                       f"({fmt(totals['params_eq2'], 'billion')})")
            if totals["params_hand"] is not None:
                out.append(f"  hand-filled N (used for model states): {totals['params_hand']:,} params")
        if ledger == "flops":
            out.append(f"  model FLOPs (no recompute): {fmt(totals['model_flops_per_iteration'], 'TFLOPs')}; "
                       f"{totals['tokens_per_iteration']:,} tokens per iteration; "
                       f"per GPU ({totals['gpus']} GPUs): {fmt(totals['flops_per_gpu_per_iteration'], 'TFLOPs')}")
        out.append("")
    out.append(f"MEMORY PER GPU: model states {fmt(totals['model_states_bytes'], 'GB')} + activations "
               f"{fmt(totals['activation_bytes'], 'GB')} = {fmt(totals['total_bytes'], 'GB')} "
               f"({fmt(totals['total_bytes'], 'GiB')})")
    if totals.get("gpu_memory_bytes") is not None:
        head = totals["headroom_bytes"]
        verdict = "fits" if head >= 0 else "does NOT fit"
        out.append(f"  against {fmt(totals['gpu_memory_bytes'], 'GB')}: {verdict}, headroom {fmt(head, 'GB')}")
    out.append("  not counted: embedding/logits/loss activations, kernel workspaces, communication buffers, "
               "allocator fragmentation")
    out.extend(f"note: {note}" for note in bill.notes)
    return "\n".join(out)


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    value = Rational(value)
    return int(value) if value.is_Integer else f"{value.p}/{value.q}"


def render_json(bill: Bill) -> str:
    data = {
        "model": bill.model.name,
        "values": bill.values,
        "layout": {k: getattr(bill.layout, k) for k in bill.layout.__dataclass_fields__},
        "strategy": bill.layout.strategy().describe(),
        **{key: _jsonable(value) for key, value in bill.totals.items()},
        "lines": [{"ledger": line.ledger, "name": line.name, "formula": sstr(line.expr),
                   "value": _jsonable(line.value), "source": line.source, "condition": line.condition}
                  for line in bill.lines],
        "notes": bill.notes,
    }
    return json.dumps(data, indent=2, ensure_ascii=False)
