"""Cold wall time of ``python -m symbolic bill MODEL``, next to ``import sympy``.

Each run is a fresh interpreter (``subprocess``), so every import is paid; the
median and the best of N runs are printed, the commands taken in turn (one run of each per round). Prints figures; asserts nothing.
``bill`` is timed twice: with its derivation cache warm (a bill of a kind seen
before: evaluated from stored formulas, no sympy) and with the cache off
(``SYMBOLIC_CACHE=off``: derived with sympy every time), both in a cache
folder of their own.

    .venv/bin/python benchmarks/cold_start.py [--runs 15] [--model gpt-175b]
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LLM_ANALYSIS_PYTHON = Path(os.environ.get("LLM_ANALYSIS_VENV", Path.home() / ".cache/symbolic-bench/llm-analysis")) / "bin/python"


def wall(argv: list[str], runs: int, env: dict | None = None, cpu: list[float] | None = None) -> list[float]:
    """Wall seconds of ``runs`` fresh runs of ``argv``; each run's CPU seconds (user + system: a shared
    machine's other jobs stretch the wall clock, much less the work a process does) appended to ``cpu``."""
    times = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if cpu is not None:
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return times


def figure(name: str, value: float, goal: float, unit: str, higher: bool = True) -> None:
    """One line ``benchmarks/all.sh`` collects: the figure beside the issue's goal."""
    met = value >= goal if higher else value <= goal
    print(f"figure: {name}: {value:.3g} {unit} (goal {'≥' if higher else '≤'} {goal:.3g}: {'met' if met else 'NOT met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--model", default="gpt-175b")
    parser.add_argument("--llm-analysis-python", default=str(LLM_ANALYSIS_PYTHON),
                        help="also time llm-analysis's CLI with this interpreter (see setup_llm_analysis.sh)")
    args = parser.parse_args()
    py = sys.executable
    cache = dict(os.environ, SYMBOLIC_CACHE_DIR=tempfile.mkdtemp(prefix="symbolic-bench-"))
    # Bytecode as an installed package has it (pip compiles on install; an editable one writes __pycache__ on
    # first import): with PYTHONDONTWRITEBYTECODE set every run would also compile each module from source.
    cache.pop("PYTHONDONTWRITEBYTECODE", None)
    off = dict(cache, SYMBOLIC_CACHE="off")
    cases = [
        ("python -c pass", [py, "-c", "pass"]),
        ("python -c 'import numpy'", [py, "-c", "import numpy"]),
        ("python -c 'import sympy'", [py, "-c", "import sympy"]),
        ("python -m symbolic --help", [py, "-m", "symbolic", "--help"]),
        (f"python -m symbolic bill {args.model} (derivation cached)", [py, "-m", "symbolic", "bill", args.model]),
        (f"python -m symbolic bill {args.model} --json (derivation cached)",
         [py, "-m", "symbolic", "bill", args.model, "--json"]),
        (f"python -m symbolic bill {args.model} (SYMBOLIC_CACHE=off: derived with sympy)",
         [py, "-m", "symbolic", "bill", args.model], off),
        ("python -m symbolic plan gpt-175b --gpus 1024 --gpu-memory 80GB --global-batch 1536",
         [py, "-m", "symbolic", "plan", "gpt-175b", "--gpus", "1024", "--gpu-memory", "80GB", "--global-batch", "1536"]),
    ]
    if Path(args.llm_analysis_python).exists():
        cases.append(("llm-analysis CLI: python -m llm_analysis.analysis train (gpt-175b-sized, 64 GPUs)",
                      [args.llm_analysis_python, "-m", "llm_analysis.analysis", "train", "--model_name",
                       "megatron-lm-175b", "--gpu_name", "a100-sxm-80gb", "--total_num_gpus", "64", "--tp_size", "8",
                       "--pp_size", "8", "--batch_size_per_gpu", "1", "--global_batch_size", "64", "--seq_len", "2048",
                       "--log_level", "ERROR"]))
    else:
        print(f"(llm-analysis not timed: no interpreter at {args.llm_analysis_python}; see setup_llm_analysis.sh)")
    wall([py, "-m", "symbolic", "bill", args.model], 2, cache)  # warm the page cache, __pycache__, the bill cache
    wall([py, "-m", "symbolic", "bill", args.model, "--json"], 1, cache)
    wall(next(argv for name, argv, *_ in cases if name.startswith("python -m symbolic plan")), 1, cache)  # its formulas
    print(f"{'command':<88} {'median':>8} {'best':>8} {'CPU med.':>8} {'CPU best':>8}   ({args.runs} fresh "
          f"processes each; load average {os.getloadavg()[0]:.1f})")
    # Round robin: each round runs every command once, so a stretch of a slower machine (another job, a
    # noisy neighbour on a shared host) falls on every command alike, not on whichever ran its runs then.
    walls = {name: [] for name, *_ in cases}
    cpus = {name: [] for name, *_ in cases}
    for _ in range(args.runs):
        for name, argv, *env in cases:
            walls[name] += wall(argv, 1, env[0] if env else cache, cpus[name])
    medians, cpu = {}, {}
    for name, *_ in cases:
        times = walls[name]
        medians[name] = statistics.median(times)
        cpu[name] = statistics.median(cpus[name])
        print(f"{name:<88} {statistics.median(times):>7.3f}s {min(times):>7.3f}s {cpu[name]:>7.3f}s "
              f"{min(cpus[name]):>7.3f}s")
    bill = medians[f"python -m symbolic bill {args.model} (derivation cached)"]
    cold_plan = next(value for name, value in medians.items() if name.startswith("python -m symbolic plan"))
    figure("plan gpt-175b for 1024 GPUs, a fresh process (its formulas cached), median", cold_plan, 1.0, "s",
           higher=False)
    figure("the same by CPU seconds (median)", next(value for name, value in cpu.items()
                                                  if name.startswith("python -m symbolic plan")), 1.0, "s", higher=False)
    theirs = next((value for name, value in medians.items() if name.startswith("llm-analysis CLI")), None)
    if theirs:
        figure(f"bill {args.model}, a fresh process (derivation cached), over llm-analysis's CLI in the same run",
               bill / theirs, 0.3, "×", higher=False)
        their_cpu = next(value for name, value in cpu.items() if name.startswith("llm-analysis CLI"))
        figure("the same by CPU seconds (medians)", cpu[f"python -m symbolic bill {args.model} (derivation cached)"]
               / their_cpu, 0.3, "×", higher=False)
    else:
        print(f"figure: bill {args.model}, a fresh process (derivation cached): {bill:.3g} s "
              "(goal ≤ 0.3× llm-analysis's CLI: not measured, no llm-analysis here)")


if __name__ == "__main__":
    main()
