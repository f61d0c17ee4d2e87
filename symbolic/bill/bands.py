"""The error band a step time carries: the model's measured error on the published runs it ships.

``symbolic/data/validation/error_bands.json`` is written by ``benchmarks/error_bands.py`` from
``derivations/throughput/public.json`` (the date, the commit and the runs file's SHA-256 inside; a test
holds it current). A bill's step time names the band of its framework preset and GPU kind, or of its GPU
kind over every framework when no preset is given, or says that no published run of its kind validates it.
"""
from __future__ import annotations

import json
from functools import cache
from pathlib import Path

BANDS = Path(__file__).resolve().parent.parent / "data" / "validation" / "error_bands.json"


@cache
def _bands() -> dict:
    if not BANDS.exists():
        return {"bands": []}
    return json.loads(BANDS.read_text())


def band(gpu: str, frameworks: tuple[str, ...] = ()) -> dict | None:
    """The shipped band of ``gpu`` (a hardware file's name) for the published frameworks a preset
    stands for (pooled: runs added, the mean weighted by runs, the max of maxima), or over every
    framework when ``frameworks`` is empty; None when no published run of that kind was priced."""
    rows = [row for row in _bands()["bands"] if row["gpu"] == gpu and (
        row["framework"] in frameworks if frameworks else row["framework"] is None)]
    if not rows:
        return None
    runs = sum(row["runs"] for row in rows)
    return {"runs": runs, "mean_abs_error": sum(row["mean_abs_error"] * row["runs"] for row in rows) / runs,
            "max_abs_error": max(row["max_abs_error"] for row in rows),
            "bias": sum(row["bias"] * row["runs"] for row in rows) / runs,
            "frameworks": tuple(row["framework"] for row in rows if row["framework"]),
            "generated": _bands().get("generated", ""), "commit": _bands().get("commit", "")}


def describe(gpu: str, frameworks: tuple[str, ...] = (), preset: str = "") -> str:
    """``±9 % on 14 published Megatron-Core H100-SXM5-80GB runs`` or ``no published run of this kind: not
    validated``."""
    found = band(gpu, frameworks)
    kind = f"{preset or '/'.join(frameworks)} " if frameworks else ""
    if found is None:
        return f"no published {kind}{gpu} run: not validated"
    over = "" if frameworks else " (all frameworks; no --framework given)"
    return (f"±{found['mean_abs_error']:.0%} mean |error|, max {found['max_abs_error']:.0%}, on "
            f"{found['runs']} published {kind}{gpu} runs{over}")
