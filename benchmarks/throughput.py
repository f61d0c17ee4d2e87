"""Measured against predicted TFLOP/s per GPU on 28 published runs (derivations/throughput/public.json).

Each run is priced by the plan's step-time model (symbolic.ledgers.time) with one hardware file per GPU
kind and the overlap strategy of the source's framework; what the source does not print (micro-batch,
interleaving, recompute, SP, ZeRO stage) the model chooses as ``plan`` would. The predicted throughput is
in the source's own FLOP convention (Narayanan's Eq 3 counts the recompute forward; Megatron-Core logs
model FLOPs). Prints the table and the mean and maximum absolute error; asserts nothing.

    .venv/bin/python benchmarks/throughput.py [--markdown] [--data FILE.json]
"""
import argparse
import math
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a markdown table (the README's)")
    parser.add_argument("--data", metavar="FILE.json",
                        help="published runs in the shape of derivations/throughput/public.json (default: that file)")
    args = parser.parse_args()
    from pathlib import Path

    from symbolic.search.throughput import DATA, predict_all

    from symbolic.models.config import ConfigError

    start = time.perf_counter()
    try:
        predictions = predict_all(Path(args.data) if args.data else DATA)
    except ConfigError as error:
        raise SystemExit(f"throughput: {error}")
    elapsed = time.perf_counter() - start
    if args.markdown:
        print("| source | model | GPUs | layout | measured | predicted | error | the model's choice | binding |")
        print("|---|---|---:|---|---:|---:|---:|---|---|")
    groups: dict[str, list[float]] = {}
    unpriced = unmeasured = 0
    for p in predictions:
        raw = str(p.row.get("source", ""))
        if raw.startswith("arXiv 2104.04473"):
            source = "Narayanan 2021 " + (raw.split(")")[-1].strip() or raw)
        elif "megatron-lm" in raw.lower() and p.gpu.startswith("H100"):
            source = "Megatron-LM H100"
        else:
            source = f"{raw[:40]} ({p.gpu})"
        gpus = p.row.get("hardware", {}).get("gpus")
        error = p.error
        if not math.isnan(error):
            groups.setdefault(source.split(" Table")[0] + (" ZeRO-3" if "ZeRO-3" in p.chosen else ""), []).append(abs(error))
            groups.setdefault(f"GPU {p.gpu}", []).append(abs(error))
            groups.setdefault("all", []).append(abs(error))
        elif math.isnan(p.predicted):
            unpriced += 1
        else:
            unmeasured += 1
        if args.markdown:
            print(f"| {source} | {p.model} | {gpus} | {p.layout} | {p.measured:.1f} | "
                  f"{p.predicted:.1f} | {error:+.1%} | {p.chosen} | {p.binding} |")
        elif math.isnan(p.predicted):
            print(f"{source:28} {p.model:13} {p.layout:28} measured {p.measured:6.1f} not priced: {p.binding}")
        elif math.isnan(p.measured):
            print(f"{source:28} {p.model:13} {p.layout:28} predicted {p.predicted:6.1f} TFLOP/s ({p.convention}); "
                  "no measurement read (tflops_per_gpu, mfu, a step time or tokens/s)")
        else:
            print(f"{source:28} {p.model:13} {p.layout:28} measured {p.measured:6.1f} predicted {p.predicted:6.1f} "
                  f"TFLOP/s ({p.convention}) error {error:+7.1%}  [{p.chosen}]")
    print()
    for name, errors in groups.items():
        print(f"{name}: {len(errors)} runs, mean |error| {sum(errors) / len(errors):.1%}, max {max(errors):.1%}")
    if unpriced:
        print(f"{unpriced} runs not priced (the reason is on each row)")
    if unmeasured:
        print(f"{unmeasured} runs priced but with no measurement the benchmark reads")
    print(f"({elapsed:.1f} s)")


if __name__ == "__main__":
    main()
