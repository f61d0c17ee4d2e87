"""Configurations per second of the vectorised sweep of the complete bill, one thread.

Each configuration is one model × layout: params (config count), model states,
activations, hardware FLOPs per iteration and the total per GPU — the bill's
totals — evaluated by ``symbolic.search.plan.sweep`` from the same expressions the bill
sums. Prints figures; asserts nothing about time.

    .venv/bin/python benchmarks/sweep_throughput.py [--configs 4000000] [--chunk 0] [--check 4]

The results go into a table allocated once (``sweep(out=...)``), as a sweep of that many configurations
keeps them; ``--chunk 16384`` times calls of one block each instead. Where the machine has a C compiler
the sweep runs each group's compiled loop (``symbolic.search.native``); the same sweeps by the numpy
kernel, a machine's path without one, are timed after it and printed beside it.
"""
import os

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[var] = "1"  # one thread (numpy's element-wise ufuncs are single-threaded anyway)

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def configurations(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """n random (model, layout) pairs: GPT shapes from 1B to 1T, every parallel size a power of two."""
    heads = rng.choice([16, 32, 64, 96, 128, 160], n)
    return {
        "h": heads * 128, "a": heads, "L": rng.choice([24, 32, 48, 64, 96, 128], n),
        "V": rng.choice([32000, 50257, 51200, 128256], n), "s": rng.choice([1024, 2048, 4096, 8192], n),
        "b": rng.choice([1, 2, 4, 8], n), "t": rng.choice([1, 2, 4, 8], n), "p": rng.choice([1, 2, 4, 8], n),
        "d": rng.choice([1, 8, 64, 512], n), "v": 1, "f": 0,
    }


def check(data, groups, per_group, micro_batches, table, per_check: int) -> None:
    """Configurations of the timed sweep (its results table, the kernel's doubles) against
    ``make_bill``'s exact totals (printed, not asserted): ``per_check`` a group, from spread offsets."""
    from symbolic.bill.derive import make_bill
    from symbolic.layout.layout import Layout
    from symbolic.models.config import ModelConfig

    worst, checked = 0.0, 0
    for g, group in enumerate(groups):
        for k in range(per_check):
            # the first configuration from an offset that the layout rules accept (the sweep itself times all)
            start = g * per_group + (12345 + k * per_group // per_check) % per_group
            for i in range(start, (g + 1) * per_group):
                model = ModelConfig("swept", int(data["L"][i]), int(data["h"][i]), int(data["a"][i]),
                                    int(data["V"][i]), int(data["s"][i]))
                layout = Layout(micro_batch=int(data["b"][i]), tp=int(data["t"][i]), pp=int(data["p"][i]),
                                dp=int(data["d"][i]), sp=group.sp, recompute=group.recompute, zero=group.zero,
                                global_batch=int(data["b"][i] * micro_batches[i]))
                if layout.is_valid(model):
                    break
            else:
                continue
            totals = make_bill(model, layout).totals
            checked += 1
            for key in ("params", "model_states_bytes", "activation_bytes", "total_bytes", "flops_per_iteration"):
                worst = max(worst, abs(table[key][i] / float(totals[key]) - 1))
            if g == 0 and k == 0:
                print(f"check: L={model.layers} h={model.hidden} s={model.seq} b={layout.micro_batch} t={layout.tp} "
                      f"p={layout.pp} d={layout.dp}: sweep total {table['total_bytes'][i]:.6e} B, "
                      f"bill {int(totals['total_bytes']):,} B; FLOPs {table['flops_per_iteration'][i]:.6e} vs "
                      f"{totals['flops_per_iteration']:,}")
    print(f"check: {checked} configurations of the timed sweep against make_bill, largest relative difference "
          f"{worst:.1e}")


def figure(name: str, value: float, goal: float, unit: str, higher: bool = True) -> None:
    """One line ``benchmarks/all.sh`` collects: the figure beside the issue's goal."""
    met = value >= goal if higher else value <= goal
    print(f"figure: {name}: {value:.3g} {unit} (goal {'≥' if higher else '≤'} {goal:.3g}: {'met' if met else 'NOT met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=4_000_000)
    parser.add_argument("--chunk", type=int, default=0,
                        help="configurations per sweep call (0: each group's whole range in one call, which the "
                             "sweep blocks into search.plan.SWEEP_BLOCK)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check", type=int, default=4, help="configurations a group checked against make_bill")
    args = parser.parse_args()

    start = time.perf_counter()
    from symbolic.search import native
    from symbolic.search.plan import PAPERS_BLOCK, SWEEP_BLOCK, SWEEP_OUTPUTS, Group, sweep
    imported = time.perf_counter()
    groups = [Group(sp=sp, recompute=rc, zero=z, schedule="1f1b")
              for sp in (False, True) for rc in ("none", "selective", "full") for z in (0, 1)]
    data = configurations(args.configs, np.random.default_rng(0))
    micro_batches = data["d"] * 8
    per_group = args.configs // len(groups)
    for group in groups:  # read (or derive) the formulas and compile each group's kernels (and C loops) once
        for papers in (False, True):
            sweep(group, {k: (x[:SWEEP_BLOCK] if isinstance(x, np.ndarray) else x) for k, x in data.items()},
                  micro_batches[:SWEEP_BLOCK], papers_only=papers, kernel=True)
    built = time.perf_counter()
    print(f"import {imported - start:.3f} s; {len(groups)} groups derived (or read from the cache) and compiled "
          f"{built - imported:.3f} s")
    # The results table a sweep of this many configurations fills (written in place, not allocated per call).
    table = {name: np.empty(args.configs) for name in SWEEP_OUTPUTS}
    chunk = args.chunk or per_group

    def timed(papers: bool) -> tuple[float, float]:
        wall = cpu = float("inf")
        names = ("paper_total_bytes",) if papers else SWEEP_OUTPUTS
        for _ in range(args.repeat):
            t0, c0_ = time.perf_counter(), time.process_time()
            for g, group in enumerate(groups):
                lo = g * per_group
                for c0 in range(lo, lo + per_group, chunk):
                    c1 = min(c0 + chunk, lo + per_group)
                    sweep(group, {k: (x[c0:c1] if isinstance(x, np.ndarray) else x) for k, x in data.items()},
                          micro_batches[c0:c1], out={name: table[name][c0:c1] for name in names},
                          papers_only=papers)
            wall = min(wall, time.perf_counter() - t0)
            cpu = min(cpu, time.process_time() - c0_)
        return wall, cpu

    evaluated = per_group * len(groups)
    # each group's loop compiled at the warm-up (none where the machine has no C compiler)
    looped = bool(native._BUILT) and all(built is not None for _, built in native._BUILT.values())
    kernel_name = "the compiled C loop (search/native.py)" if looped else "the numpy kernel (search/kernel.py)"
    best, cpu_best = timed(False)
    check(data, groups, per_group, micro_batches, table, args.check)
    print(f"{evaluated:,} configurations × 5 totals (params, model states, activations, FLOPs, total) "
          f"in {best:.3f} s by {kernel_name} (best of {args.repeat}, "
          f"{'one call a group' if not args.chunk else f'calls of {chunk:,}'}, into a results table): "
          f"{evaluated / best:.3g} configurations/s on one thread ({evaluated / cpu_best:.3g} by CPU time; load average "
          f"{os.getloadavg()[0]:.1f})")
    verdict_papers = table["paper_total_bytes"][:evaluated].copy()
    papers, papers_cpu = timed(True)
    same = np.array_equal(verdict_papers, table["paper_total_bytes"][:evaluated])
    print(f"check: the papers' totals alone equal the full sweep's paper_total_bytes on all {evaluated:,}: {same}")
    print(f"the papers' totals alone (model states + activations): {evaluated / papers:.3g} configurations/s "
          f"({evaluated / papers_cpu:.3g} by CPU time) by {kernel_name}")
    if looped:  # the same sweeps by the numpy kernel, the path of a machine without a C compiler
        built = dict(native._BUILT)
        native._BUILT.clear()
        os.environ["SYMBOLIC_NATIVE"] = "0"
        try:
            numpy_best, _ = timed(False)
            same_full = np.array_equal(verdict_papers, table["paper_total_bytes"][:evaluated])
            numpy_papers, _ = timed(True)
            same_papers = np.array_equal(verdict_papers, table["paper_total_bytes"][:evaluated])
        finally:
            del os.environ["SYMBOLIC_NATIVE"]
            native._BUILT.clear()
            native._BUILT.update(built)
        print(f"the numpy kernel (no C compiler; blocks of {SWEEP_BLOCK:,} and {PAPERS_BLOCK:,}): with the verdict "
              f"{evaluated / numpy_best:.3g}/s, the papers' totals {evaluated / numpy_papers:.3g}/s; "
              f"check: the same doubles as the loop's: {same_full and same_papers}")
    figure("sweep with the verdict as total, one thread", evaluated / best, 1e7, "configurations/s")
    figure("the papers' totals (states + activations), one thread", evaluated / papers, 5e7, "configurations/s")


if __name__ == "__main__":
    main()
