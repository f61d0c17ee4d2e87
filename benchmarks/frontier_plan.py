"""Time of ``plan`` for the frontier: DeepSeek-V3 on 2048 H800s (every valid layout over t, p, d, c, e, e_t, b,
v, ZeRO, SP, recompute), in a fresh process with its formulas cached, against a cached cold ``bill`` of the
same model — issue 45's goal: the plan within 8× the bill.

Each run is a fresh interpreter (``subprocess``); both commands share one cache folder of their own, warmed by one
run of each first. Taken in turn (a bill, then a plan, per round), so a shared machine's load falls on both;
the median and the best of the rounds are printed, wall and CPU (user + system) seconds. Then
``--framework megatron-core`` (its preset's groups not yet cached: derived with sympy) the first time, and again
cached. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/frontier_plan.py [--rounds 5]
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

PLAN = ["plan", "deepseek-v3", "--gpus", "2048", "--gpu", "h800", "--seq", "4096", "--global-batch", "15360"]
BILL = ["bill", "deepseek-v3"]


def run(args: list[str], env: dict) -> tuple[float, float]:
    """(wall, CPU) seconds of one fresh ``python -m symbolic ARGS``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "symbolic", *args], check=True, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def figure(name: str, value: float, goal: float, unit: str, higher: bool = True) -> None:
    """One line ``benchmarks/all.sh`` collects: the figure beside the issue's goal."""
    met = value >= goal if higher else value <= goal
    print(f"figure: {name}: {value:.3g} {unit} (goal {'≥' if higher else '≤'} {goal:.3g}: {'met' if met else 'NOT met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    env = dict(os.environ, SYMBOLIC_CACHE_DIR=tempfile.mkdtemp(prefix="symbolic-frontier-"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode as an installed package has it
    env.pop("SYMBOLIC_CACHE", None)
    warm_bill, warm_plan = run(BILL, env), run(PLAN, env)
    print(f"warm-up (formulas derived and cached): bill {warm_bill[0]:.2f} s, plan {warm_plan[0]:.2f} s wall")
    bills, plans = [], []
    for _ in range(args.rounds):
        bills.append(run(BILL, env))
        plans.append(run(PLAN, env))
    for name, runs in (("bill deepseek-v3 (cached, cold process)", bills), (" ".join(PLAN) + " (cached)", plans)):
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"{name}: wall median {statistics.median(walls):.2f} s, best {min(walls):.2f} s; "
              f"CPU median {statistics.median(cpus):.2f} s, best {min(cpus):.2f} s")
    ratio_wall = statistics.median(w for w, _ in plans) / statistics.median(w for w, _ in bills)
    ratio_cpu = statistics.median(c for _, c in plans) / statistics.median(c for _, c in bills)
    print(f"plan / bill: {ratio_wall:.1f}× wall (medians), {ratio_cpu:.1f}× CPU (medians)")
    megatron = PLAN + ["--framework", "megatron-core"]
    first, again = run(megatron, env), run(megatron, env)
    print(f"--framework megatron-core: first {first[0]:.2f} s wall ({first[1]:.2f} s CPU), "
          f"cached {again[0]:.2f} s wall ({again[1]:.2f} s CPU)")
    figure("plan deepseek-v3 on 2048 GPUs over a cached cold bill (CPU, medians)", ratio_cpu, 8, "×", higher=False)


if __name__ == "__main__":
    main()
