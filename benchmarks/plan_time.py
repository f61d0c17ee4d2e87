"""Time of ``plan`` for 1024 GPUs: every valid layout of GPT-3 175B, evaluated and ranked.

In process: the first call derives the ledgers' expressions, or reads them from the cache (once
per discrete choice); later calls reuse them. The fresh-process wall time of the
CLI is in ``cold_start.py``. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/plan_time.py [--gpus 1024] [--global-batch 1536]
"""
import argparse
import time


def figure(name: str, value: float, goal: float, unit: str, higher: bool = True) -> None:
    """One line ``benchmarks/all.sh`` collects: the figure beside the issue's goal."""
    met = value >= goal if higher else value <= goal
    print(f"figure: {name}: {value:.3g} {unit} (goal {'≥' if higher else '≤'} {goal:.3g}: {'met' if met else 'NOT met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt-175b")
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--global-batch", type=int, default=1536, help="GPT-3's 1536 sequences (Brown et al. 2020)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    t0 = time.perf_counter()
    from symbolic.models.builtin import preset
    from symbolic.search.plan import plan
    t1 = time.perf_counter()
    model = preset(args.model)

    def once():
        start = time.perf_counter()
        result = plan(model, args.gpus, 80 * 10**9, global_batch=args.global_batch)
        swept = time.perf_counter()
        top = result.ranked(10)
        return result, top, swept - start, time.perf_counter() - swept

    result, top, first_sweep, first_rank = once()
    warm = [once() for _ in range(args.repeat)]
    best_sweep = min(w[2] for w in warm)
    best_rank = min(w[3] for w in warm)
    print(f"{args.model} on {args.gpus} GPUs × 80 GB, global batch {args.global_batch}: "
          f"{result.evaluated:,} valid layouts, {len(result.order):,} fit")
    print(f"import {t1 - t0:.3f} s")
    print(f"first plan in the process (its groups derived, or read from the cache, and compiled): sweep {first_sweep * 1e3:.0f} ms, "
          f"exact top 10 {first_rank * 1e3:.0f} ms")
    print(f"warm plan (best of {args.repeat}): sweep {best_sweep * 1e3:.1f} ms "
          f"({result.evaluated / best_sweep:.3g} layouts/s incl. enumeration), exact top 10 {best_rank * 1e3:.0f} ms")
    best = top[0]
    lay = best.layout
    print(f"fastest: t={lay.tp} p={lay.pp} d={lay.dp} v={lay.interleave} b={lay.micro_batch} ZeRO-{lay.zero} "
          f"SP={lay.sp} {lay.recompute}: {best.totals['total_bytes'] / 1e9:.2f} GB, step {best.step_seconds:.3f} s")
    figure(f"plan {args.model} on {args.gpus} GPUs, warm in process (sweep + exact top 10)", best_sweep + best_rank,
           0.3, "s", higher=False)


if __name__ == "__main__":
    main()
