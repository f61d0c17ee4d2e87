"""Golden files: the engine's derived results, written to derivations/golden/.

The tests regenerate them and compare, so any change to an inventory or a
strategy shows up as a reviewed diff of these files. Rewrite them with
``python -m symbolic.claims.golden`` after a deliberate change.
"""
from __future__ import annotations

import json
import sys

from sympy import sstr

from ..core.forms import paper_form
from .claims import DERIVATIONS
from .quantities import evaluate

GOLDEN = DERIVATIONS / "golden" / "gpt.json"

_TP = {"tensor_parallel": True}
_TPSP = {"tensor_parallel": True, "sequence_parallel": True}

#: (name, quantity, options): the results the papers print, for the GPT layer.
RESULTS = [
    ("activations/per_layer/none", "activations.per_layer", {}),
    ("activations/per_layer/tp", "activations.per_layer", _TP),
    ("activations/per_layer/tp_sp", "activations.per_layer", _TPSP),
    ("activations/per_layer/tp_selective", "activations.per_layer", dict(_TP, recompute="selective")),
    ("activations/per_layer/tp_sp_selective", "activations.per_layer", dict(_TPSP, recompute="selective")),
    ("activations/per_layer/full", "activations.per_layer", dict(_TP, recompute="full")),  # Table 2: 2sbh
    ("activations/per_layer/tp_sp_full", "activations.per_layer", dict(_TPSP, recompute="full")),  # 2sbh/t
    ("activations/stage/tp_sp_1f1b", "activations.stage", dict(_TPSP, pipeline=True)),
    ("activations/stage/tp_sp_interleaved", "activations.stage", dict(_TPSP, pipeline=True, interleaved=True)),
    ("activations/interleave_factor", "activations.interleave_factor", _TPSP),
    ("params/full", "params", {}),
    ("params/eq2", "params", {"scopes": ["layer", "embedding"]}),
    ("params/kaplan", "params.kaplan", {}),
    ("states/bf16-adam/zero0", "states.per_gpu", {"zero": 0}),
    ("states/bf16-adam/zero1", "states.per_gpu", {"zero": 1}),
    ("states/bf16-adam/zero2", "states.per_gpu", {"zero": 2}),
    ("states/bf16-adam/zero3", "states.per_gpu", {"zero": 3}),
    ("flops/forward", "flops.forward", {}),
    ("flops/model_training", "flops.model_training", {}),
    ("flops/hardware_selective", "flops.hardware_training", {"recompute": "selective"}),
    ("flops/hardware_full", "flops.hardware_training", {"recompute": "full"}),
    ("flops/kaplan_forward_per_token", "flops.kaplan_forward_per_token", {}),
]


def derive_all() -> dict[str, dict[str, str]]:
    out = {}
    for name, quantity, options in RESULTS:
        expr = evaluate(quantity, **options)
        out[name] = {"quantity": quantity, "options": json.dumps(options, sort_keys=True),
                     "expr": sstr(expr), "paper_form": sstr(paper_form(expr))}
    return out


def render() -> str:
    return json.dumps(derive_all(), indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def main() -> int:
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(render())
    print(f"wrote {GOLDEN}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
