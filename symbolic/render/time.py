"""The TIME section of the bill: the step-time model's every factor, as text and as JSON.

Its own module so the bill's other sections render unchanged; the bill command
prints it after them and merges :func:`time_json` into the bill's JSON.
"""
from __future__ import annotations

from ..ledgers.arrays import first

#: The breakdown's parts, in the order they print, with their meaning.
PARTS = {
    "compute": "GEMMs and attention: FLOPs on the pacing stage / (peak × the kernel's efficiency at its shape)",
    "elementwise": "non-matmul kernels: saved-tensor bytes × passes / (HBM × efficiency)",
    "tp_exposed": "tensor-parallel collectives not hidden",
    "cp_exposed": "context-parallel K/V ring beyond the attention core it overlaps",
    "ep_exposed": "expert-parallel all-to-all",
    "pp_exposed": "pipeline stage sends",
    "bubble": "pipeline bubble (p−1)/(v·m) × the pipelined part",
    "dp_exposed": "data-parallel reduce / parameter gather not hidden",
    "zero3_exposed": "ZeRO-3 parameter gathers and gradient scatters not hidden",
    "overlap_slowdown": "hidden collectives' share of the SMs × their time (processor_usage per link)",
    "optimizer": "optimizer step: state bytes read and written / (HBM × efficiency)",
}


def _f(x) -> float:
    return float(first(x))


def _seconds(x) -> str:
    x = _f(x)
    return f"{x * 1e3:,.2f} ms" if x < 1 else f"{x:,.3f} s"


def _bytes(x) -> str:
    x = _f(x)
    return f"{x / 1e9:,.3f} GB" if x >= 1e8 else f"{x / 1e6:,.3f} MB"


def _gemm_words(f: dict) -> str:
    """``fp8 (fp8-delayed at the FP8 peak 1979 TFLOP/s; the output layer and attention in bf16)``."""
    dtype = f.get("gemm_dtype", "bf16")
    if dtype not in ("fp8", "fp4"):
        return dtype
    recipe = f.get("precision", "")
    peak = f.get("gemm_peak_flops")
    return (f"{dtype} ({recipe + ' ' if recipe and recipe != 'bf16' else ''}at the {dtype.upper()} peak"
            + (f" {peak / 1e12:g} TFLOP/s" if peak else "")
            + (" × the shape's BF16 efficiency × mamf-finder's FP8/BF16 ceiling ratio" if f.get("kernel_sources") else
               " × the hardware file's GEMM efficiency")
            + ("; FP4 at the FP8 ratio: no FP4 ceiling is published" if dtype == "fp4" else "")
            + "; the output layer and attention in bf16)")


def time_lines(step, bill=None) -> list[str]:
    """The TIME section as lines of text."""
    f = step.factors
    total = _f(step.step_seconds)
    out = [f"TIME (one iteration) on {f['hardware']}: peak {f['peak_flops'] / 1e12:g} TFLOP/s dense, "
           f"weight GEMMs in {_gemm_words(f)}, NVLink domain {f['gpus_per_node']} GPUs, {f['overlap']}; "
           f"m = {_f(f['micro_batches_per_pipeline']):g} micro-batches per pipeline"]
    from ..bill.bands import describe

    band = describe(f["hardware"], tuple(f.get("band_frameworks", ())), f.get("framework", ""))
    out.append(f"  step {_seconds(total)} ({band})   tokens/s {_f(step.tokens_per_second):,.0f}   "
               f"model {_f(step.model_tflops_per_gpu):.1f} TFLOP/s per GPU (MFU {_f(step.mfu):.1%})   "
               f"hardware {_f(step.hardware_tflops_per_gpu):.1f} TFLOP/s per GPU (HFU {_f(step.hfu):.1%})")
    if f.get("framework_settings"):
        why = f"assumed: {f['framework_assumed']}" if f.get("framework_assumed") else "--framework"
        out.append(f"  framework preset {f['framework']} ({why}), its defaults:")
        out.extend(f"    {name:<20} {value:<16} {source}" for name, value, source in f["framework_settings"])
    if f.get("kernels"):
        out.append(f"  kernels: {f['kernels']}")
    out.append("  breakdown:")
    for name, meaning in PARTS.items():
        value = _f(step.breakdown[name])
        if name == "bubble" and f.get("schedule"):
            meaning = (f"pipeline bubble: the {f['schedule']} schedule's order simulated with a chunk's F "
                       f"{_seconds(f['chunk_forward_seconds'])}, B {_seconds(f['chunk_input_gradient_seconds'])}, "
                       f"W {_seconds(f['chunk_weight_gradient_seconds'])} (its paper: {f['bubble_formula']})")
        elif name == "ep_exposed" and f.get("paired_share"):
            meaning = (f"expert-parallel all-to-all: {_f(f['paired_share']):.1%} of the forwards and backwards run "
                       "as overlapped F&B pairs, their all-to-all and sends under the other micro-batch's compute")
        if value > 0 or name in ("compute", "bubble"):
            out.append(f"    {name:<14} {_seconds(value):>12} {value / total:>6.1%}  {meaning}")
    out.append("  compute lines (pacing stage, per GPU):")
    for line in step.compute_lines:
        out.append(f"    {line['name']:<52} {_f(line['flops_on_pacing_stage']) / 1e12:>12,.2f} TFLOPs  GEMM call "
                   f"{_f(line['gemm_flops_per_call']) / 1e9:>9,.2f} GFLOP → efficiency {_f(line['efficiency']):.3f}"
                   f"  {_seconds(line['seconds']):>12}" + (f"  [{line['kernel']}]" if line.get("kernel") else ""))
    out.append("  communication (per GPU per iteration; α + ring factor × bytes / bus bandwidth per call):")
    for line in step.comm_lines:
        if _f(line["ranks"]) <= 1:
            continue
        out.append(f"    {line['class'].split(':')[0]}/{line['phase']:<9} {line['collective']:<14} over "
                   f"{line['group']}={_f(line['ranks']):g} on {first(line['link']):<7} "
                   f"calls {_f(line['calls']):>9,.0f}  Σbytes {_bytes(line['bytes']):>12}  ring ×{_f(line['ring_factor']):.3f}"
                   f"  bus {_f(line['bus_bandwidth']) / 1e9:,.1f} GB/s  α {_f(line['latency_per_call']) * 1e6:,.1f} µs"
                   f"  → {_seconds(line['seconds'])}, exposed {_seconds(line['exposed'])}")
    out.extend(f"  not priced: {item}" for item in f.get("not_priced", ()))
    out.append("  sources: symbolic/ledgers/time.py (the model), symbolic/ledgers/communication.py (the terms), "
               f"the hardware file's `sources` ({f['hardware']})")
    return out


def time_json(step) -> dict:
    """The bill's time keys (floats: a modelled time, not an exact count)."""
    from ..bill.bands import band, describe

    f = step.factors
    frameworks = tuple(f.get("band_frameworks", ()))
    return {
        "step_seconds": _f(step.step_seconds),
        "step_error_band": {"text": describe(f["hardware"], frameworks, f.get("framework", "")),
                            **(band(f["hardware"], frameworks) or {"runs": 0})},
        "tokens_per_second": _f(step.tokens_per_second),
        "model_tflops_per_gpu": _f(step.model_tflops_per_gpu),
        "hardware_tflops_per_gpu": _f(step.hardware_tflops_per_gpu),
        "mfu": _f(step.mfu),
        "hfu": _f(step.hfu),
        "time_breakdown": {name: _f(step.breakdown[name]) for name in PARTS},
        "time_model": {
            "hardware": f["hardware"], "peak_flops": f["peak_flops"], "gemm_dtype": f.get("gemm_dtype", "bf16"),
            "gpus_per_node": f["gpus_per_node"],
            "overlap": f["overlap"], "micro_batches_per_pipeline": _f(f["micro_batches_per_pipeline"]),
            "pacing_stage": str(first(f.get("pacing_stage", "last"))),
            "schedule": f.get("schedule", ""), "paired_share": _f(f.get("paired_share", 0.0)),
            "framework": f.get("framework"),
            "framework_settings": [{"setting": n, "value": v, "source": src} for n, v, src in f.get("framework_settings", ())],
            "kernels": f.get("kernels", ""), "kernel_approximation": f.get("kernel_approximation", ""),
            "kernel_sources": list(f.get("kernel_sources", ())),
            "not_priced": list(f.get("not_priced", ())),
            "compute": [{"name": x["name"], "flops_on_pacing_stage": _f(x["flops_on_pacing_stage"]),
                         "gemm_flops_per_call": _f(x["gemm_flops_per_call"]), "efficiency": _f(x["efficiency"]),
                         "seconds": _f(x["seconds"]), "kernel": x.get("kernel", "gemm")} for x in step.compute_lines],
            "communication": [{"terms": list(x["names"]), "group": x["group"], "collective": x["collective"],
                               "phase": x["phase"], "ranks": _f(x["ranks"]), "calls": _f(x["calls"]),
                               "bytes": _f(x["bytes"]), "ring_factor": _f(x["ring_factor"]),
                               "latency_per_call_seconds": _f(x["latency_per_call"]),
                               "bus_bandwidth": _f(x["bus_bandwidth"]),
                               "link": str(first(x["link"])), "seconds": _f(x["seconds"]),
                               "exposed_seconds": _f(x["exposed"])} for x in step.comm_lines],
        },
    }
