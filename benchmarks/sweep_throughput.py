"""Configurations per second of the vectorised sweep of the complete bill, one thread.

Each configuration is one model × layout: params (config count), model states,
activations, hardware FLOPs per iteration and the total per GPU — the bill's
totals — evaluated by ``symbolic.search.plan.sweep`` from the same expressions the bill
sums. Prints figures; asserts nothing about time.

    .venv/bin/python benchmarks/sweep_throughput.py [--configs 4000000] [--chunk 16384]
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


def check(data, groups, per_group, micro_batches) -> None:
    """A few of the swept configurations against ``make_bill``'s exact totals (printed, not asserted)."""
    from symbolic.bill.derive import make_bill
    from symbolic.layout.layout import Layout
    from symbolic.models.config import ModelConfig
    from symbolic.search.plan import sweep

    worst = 0.0
    for g, group in enumerate(groups):
        # the first configuration from a fixed offset that the layout rules accept (the sweep itself times all)
        for i in range(g * per_group + 12345 % per_group, (g + 1) * per_group):
            one = {k: (x[i:i + 1] if isinstance(x, np.ndarray) else x) for k, x in data.items()}
            model = ModelConfig("swept", int(one["L"][0]), int(one["h"][0]), int(one["a"][0]), int(one["V"][0]),
                                int(one["s"][0]))
            layout = Layout(micro_batch=int(one["b"][0]), tp=int(one["t"][0]), pp=int(one["p"][0]),
                            dp=int(one["d"][0]), sp=group.sp, recompute=group.recompute, zero=group.zero,
                            global_batch=int(one["b"][0] * micro_batches[i]))
            if layout.is_valid(model):
                break
        out = sweep(group, one, micro_batches[i:i + 1])
        totals = make_bill(model, layout).totals
        for key in ("params", "model_states_bytes", "activation_bytes", "total_bytes", "flops_per_iteration"):
            worst = max(worst, abs(out[key][0] / float(totals[key]) - 1))
        if g == 0:
            print(f"check: L={model.layers} h={model.hidden} s={model.seq} b={layout.micro_batch} t={layout.tp} "
                  f"p={layout.pp} d={layout.dp}: sweep total {out['total_bytes'][0]:.6e} B, "
                  f"bill {int(totals['total_bytes']):,} B; FLOPs {out['flops_per_iteration'][0]:.6e} vs "
                  f"{totals['flops_per_iteration']:,}")
    print(f"check: {len(groups)} configurations against make_bill, largest relative difference {worst:.1e}")


def figure(name: str, value: float, goal: float, unit: str, higher: bool = True) -> None:
    """One line ``benchmarks/all.sh`` collects: the figure beside the issue's goal."""
    met = value >= goal if higher else value <= goal
    print(f"figure: {name}: {value:.3g} {unit} (goal {'≥' if higher else '≤'} {goal:.3g}: {'met' if met else 'NOT met'})")


def papers_totals(group, values, micro_batches):
    """The papers' totals alone (model states + first-stage activations, Ψ counted), no verdict:
    the group's cached formulas (``search.plan.group_formulas``) read into one numpy function."""
    from symbolic.search.plan import ARG_NAMES, _array_function, group_formulas, in_flight_array

    formulas = group_formulas(group)
    env = dict.fromkeys(ARG_NAMES, 1.0)
    env.update({k: np.asarray(x, dtype=np.float64) for k, x in values.items()})
    env["c"] = 1.0
    pp, vv = np.asarray(values["p"]).astype(np.int64), np.broadcast_to(np.asarray(values["v"]), np.shape(values["p"]))
    env["m"] = in_flight_array(pp, vv, micro_batches // np.asarray(values["d"]), "first").astype(np.float64)
    env["Psi"] = 0.0
    (env["Psi"],) = _array_function((formulas.params,))(env)
    states, acts = _array_function((formulas.model_states_bytes, formulas.activation_bytes))(env)
    return states + acts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=4_000_000)
    parser.add_argument("--chunk", type=int, default=1 << 14,
                        help="configurations per numpy call (cache-sized: search.plan.SWEEP_BLOCK, which the sweep "
                             "blocks larger calls into)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    start = time.perf_counter()
    from symbolic.search.plan import Group, sweep
    imported = time.perf_counter()
    groups = [Group(sp=sp, recompute=rc, zero=z, schedule="1f1b")
              for sp in (False, True) for rc in ("none", "selective", "full") for z in (0, 1)]
    data = configurations(args.configs, np.random.default_rng(0))
    micro_batches = data["d"] * 8
    for group in groups:  # build and lambdify the expressions once
        sweep(group, {k: (x[:2] if isinstance(x, np.ndarray) else x) for k, x in data.items()}, micro_batches[:2])
    built = time.perf_counter()
    print(f"import {imported - start:.3f} s; {len(groups)} groups derived (or read from the cache) and compiled "
          f"{built - imported:.3f} s")

    per_group = args.configs // len(groups)
    best = cpu_best = float("inf")
    for _ in range(args.repeat):
        t0, c0_ = time.perf_counter(), time.process_time()
        checksum = 0.0
        for g, group in enumerate(groups):
            lo = g * per_group
            for c0 in range(lo, lo + per_group, args.chunk):
                c1 = min(c0 + args.chunk, lo + per_group)
                chunk = {k: (x[c0:c1] if isinstance(x, np.ndarray) else x) for k, x in data.items()}
                out = sweep(group, chunk, micro_batches[c0:c1])
                checksum += float(out["total_bytes"][0])
        best = min(best, time.perf_counter() - t0)
        cpu_best = min(cpu_best, time.process_time() - c0_)
    evaluated = per_group * len(groups)
    check(data, groups, per_group, micro_batches)
    print(f"{evaluated:,} configurations × 5 totals (params, model states, activations, FLOPs, total) "
          f"in {best:.3f} s (best of {args.repeat}, chunks of {args.chunk:,}): "
          f"{evaluated / best:.3g} configurations/s on one thread ({evaluated / cpu_best:.3g} by CPU time; load average "
          f"{os.getloadavg()[0]:.1f})")
    one = {k: (x[:4096] if isinstance(x, np.ndarray) else x) for k, x in data.items()}
    same = np.array_equal(papers_totals(groups[0], one, micro_batches[:4096]),
                          sweep(groups[0], one, micro_batches[:4096])["paper_total_bytes"])
    print(f"check: the papers' totals alone equal the sweep's paper_total_bytes: {same}")
    papers = papers_cpu = float("inf")
    for _ in range(args.repeat):
        t0, c0_ = time.perf_counter(), time.process_time()
        for g, group in enumerate(groups):
            lo = g * per_group
            for c0 in range(lo, lo + per_group, args.chunk):
                c1 = min(c0 + args.chunk, lo + per_group)
                papers_totals(group, {k: (x[c0:c1] if isinstance(x, np.ndarray) else x) for k, x in data.items()},
                              micro_batches[c0:c1])
        papers = min(papers, time.perf_counter() - t0)
        papers_cpu = min(papers_cpu, time.process_time() - c0_)
    print(f"the papers' totals alone (model states + activations): {evaluated / papers:.3g} configurations/s "
          f"({evaluated / papers_cpu:.3g} by CPU time)")
    figure("sweep with the verdict as total, one thread", evaluated / best, 1e7, "configurations/s")
    figure("the papers' totals (states + activations), one thread", evaluated / papers, 5e7, "configurations/s")


if __name__ == "__main__":
    main()
