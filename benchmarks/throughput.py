"""Measured against predicted TFLOP/s per GPU on the published runs (derivations/throughput/public.json).

Each run is priced by the plan's step-time model (symbolic.ledgers.time) with one hardware file per GPU
kind and the overlap strategy of the source's framework; what the source does not print (micro-batch,
interleaving, recompute, SP, ZeRO stage) the model chooses as ``plan`` would. The predicted throughput is
in the source's own FLOP convention (Narayanan's Eq 3 counts the recompute forward; Megatron-Core logs
model FLOPs). Prints the table and the error by source, GPU kind, framework and dense / MoE / long
context, the FLOPs-only one-liner (6N·tokens ÷ (GPUs × dense peak × 0.5)) beside each group; asserts
nothing.

    .venv/bin/python benchmarks/throughput.py [--markdown] [--data FILE.json]
"""
import argparse
import math
import time


def summary(errors: list[float]) -> tuple[float, float, float, float]:
    """(mean |error|, median |error|, max |error|, mean signed error) of signed relative errors."""
    import statistics

    absolute = [abs(e) for e in errors]
    return sum(absolute) / len(absolute), statistics.median(absolute), max(absolute), sum(errors) / len(errors)


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
    from symbolic.search.throughput import kind_of, source_of

    if args.markdown:
        print("| source | model | GPUs | layout | measured | predicted | error | one-liner | the model's choice | binding |")
        print("|---|---|---:|---|---:|---:|---:|---:|---|---|")
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    unpriced = unmeasured = 0
    for p in predictions:
        source, framework = source_of(p.row)
        gpus = p.row.get("hardware", {}).get("gpus") if isinstance(p.row.get("hardware"), dict) else None
        error = p.error
        if not math.isnan(error):
            pair = (error, p.baseline_error)
            for axis, name in (("all", "all"), ("source", source), ("GPU", p.gpu), ("framework", framework),
                               ("kind", kind_of(p.row))):
                groups.setdefault((axis, name), []).append(pair)
        elif math.isnan(p.predicted):
            unpriced += 1
        else:
            unmeasured += 1
        if args.markdown:
            print(f"| {source} | {p.model} | {gpus} | {p.layout} | {p.measured:.1f} | "
                  f"{p.predicted:.1f} | {error:+.1%} | {p.baseline_error:+.1%} | {p.chosen} | {p.binding} |")
        elif math.isnan(p.predicted):
            print(f"{source:22} {p.gpu:15} {p.model:16} {p.layout:28} measured {p.measured:6.1f} not priced: {p.binding}")
        elif math.isnan(p.measured):
            print(f"{source:22} {p.gpu:15} {p.model:16} {p.layout:28} predicted {p.predicted:6.1f} TFLOP/s "
                  f"({p.convention}); no measurement read (tflops_per_gpu, mfu, a step time or tokens/s)")
        else:
            print(f"{source:22} {p.gpu:15} {p.model:16} {p.layout:28} measured {p.measured:6.1f} predicted "
                  f"{p.predicted:6.1f} TFLOP/s ({p.convention}) error {error:+7.1%} one-liner "
                  f"{p.baseline_error:+7.1%}  [{p.chosen}]")
    print()
    print("Error on the priced runs, by group: the model against the FLOPs-only one-liner "
          "(6N·tokens ÷ (GPUs × dense peak × 0.5)); bias = mean signed error (+: predicted faster)")
    if args.markdown:
        print("| group | runs | model mean | median | max | bias | one-liner mean | median | max | bias |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for axis in ("all", "source", "GPU", "framework", "kind"):
        for (group_axis, name), pairs in sorted(groups.items()):
            if group_axis != axis:
                continue
            model = summary([e for e, _ in pairs])
            line = summary([b for _, b in pairs])
            label = name if axis == "all" else f"{axis}: {name}"
            if args.markdown:
                print(f"| {label} | {len(pairs)} | {model[0]:.1%} | {model[1]:.1%} | {model[2]:.1%} | {model[3]:+.1%} "
                      f"| {line[0]:.1%} | {line[1]:.1%} | {line[2]:.1%} | {line[3]:+.1%} |")
            else:
                better = "ahead" if model[0] < line[0] else "BEHIND"
                print(f"{label:42} {len(pairs):3} runs  model mean {model[0]:6.1%} median {model[1]:6.1%} "
                      f"max {model[2]:6.1%} bias {model[3]:+6.1%} | one-liner mean {line[0]:6.1%} median "
                      f"{line[1]:6.1%} max {line[2]:6.1%} bias {line[3]:+6.1%}  {better}")
    if unpriced:
        print(f"{unpriced} runs not priced (the reason is on each row)")
    if unmeasured:
        print(f"{unmeasured} runs priced but with no measurement the benchmark reads")
    print(f"({elapsed:.1f} s)")


if __name__ == "__main__":
    main()
