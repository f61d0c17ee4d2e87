"""Wall time of the test suite as CI runs it (``scripts/test``: the wheel step, then pytest over tests/ and
the notebooks under xdist, --dist loadscope), and where the time goes: the summed test time per file, slowest first.

Runs in fresh processes with a fresh derivation cache (as a clean clone's CI does) and prints the figures;
asserts nothing about time. The notebooks and the browser test run where their tools are installed
(``scripts/test`` sets them up).

    .venv/bin/python benchmarks/suite_time.py                 # the pytest step, -n auto --dist loadscope
    .venv/bin/python benchmarks/suite_time.py --serial        # the same tests in one process
    .venv/bin/python benchmarks/suite_time.py --wheel         # also time scripts/check_wheel
    .venv/bin/python benchmarks/suite_time.py --only tests/test_plan.py tests/test_solve.py
"""
import argparse
import collections
import os
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: scripts/test's pytest arguments without its own (kept in step with that script)
SUITE = ["tests", "notebooks", "--nbval", "--nbval-current-env"]
PARALLEL = ["-n", "auto", "--dist", "loadscope"]


def timed(argv: list[str], env: dict) -> tuple[float, str]:
    start, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env)
    seconds, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU time of the run and its workers: on a shared machine the wall time is inflated, this is not
    print(f"  (cpu {after.ru_utime - cpu.ru_utime + after.ru_stime - cpu.ru_stime:.1f} s over {os.cpu_count()} "
          f"cores, load average {os.getloadavg()[0]:.2f} at the end)")
    return seconds, (run.stdout + run.stderr)


def figure(name: str, value: float, goal: float, unit: str, higher: bool = True) -> None:
    """One line ``benchmarks/all.sh`` collects: the figure beside the issue's goal."""
    met = value >= goal if higher else value <= goal
    print(f"figure: {name}: {value:.3g} {unit} (goal {'≥' if higher else '≤'} {goal:.3g}: {'met' if met else 'NOT met'})")


def per_file(junit: Path) -> collections.Counter:
    """Seconds of test time (setup, call, teardown) summed per file, from pytest's JUnit XML."""
    seconds: collections.Counter = collections.Counter()
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        seconds[name.split("::")[0]] += float(case.get("time", 0))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="time only these test files (in one process)")
    parser.add_argument("--serial", action="store_true", help="run the suite in one process (no xdist)")
    parser.add_argument("--wheel", action="store_true", help="also time scripts/check_wheel (the CI's first step)")
    parser.add_argument("--files", type=int, default=15, help="how many of the slowest files to print")
    args = parser.parse_args()
    env = dict(os.environ, SYMBOLIC_CACHE_DIR=tempfile.mkdtemp(prefix="symbolic-suite-"))  # a clean clone's cache
    junit = Path(tempfile.mkdtemp(prefix="symbolic-suite-junit-")) / "junit.xml"
    print(f"per-test times: {junit}")
    # As scripts/test runs it: symbolic/ compiled once first (PYTHONDONTWRITEBYTECODE=1 on this machine and in
    # CI, so otherwise every worker, CLI subprocess and notebook kernel compiles the package from source), and
    # -p tests._fast_start loaded before the installed plugins (1.9 s of CPU a pytest process, see that file).
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "compileall", "-q", "symbolic"], cwd=ROOT, env=env, check=True)
    print(f"compileall symbolic/ (scripts/test's step before pytest): {time.perf_counter() - start:.1f} s wall")
    base = [sys.executable, "-m", "pytest", "-p", "tests._fast_start", "-p", "no:cacheprovider",
            f"--junitxml={junit}", "-o", "junit_family=xunit1"]  # xunit1: each case names its file
    if args.only:
        name, argv = " ".join(args.only), base + args.only
    elif args.serial:
        name, argv = "the suite (tests/ + notebooks/), one process", base + SUITE
    else:
        name, argv = f"the suite (tests/ + notebooks/), {' '.join(PARALLEL)} on {os.cpu_count()} cores", \
            base + SUITE + PARALLEL
    if args.wheel:
        seconds, output = timed(["bash", "scripts/check_wheel"], env)
        print(f"scripts/check_wheel: {seconds:.1f} s wall — {output.strip().splitlines()[-1] if output.strip() else ''}")
    seconds, output = timed(argv, env)
    summary = [line for line in output.splitlines() if " passed" in line or " failed" in line or "error" in line]
    print(f"{name}: {seconds:.1f} s wall — {summary[-1].strip('= ') if summary else 'no summary line'}")
    if not summary or " passed" not in summary[-1] or " failed" in summary[-1] or " error" in summary[-1]:
        print("\n".join(output.splitlines()[-40:]))  # what went wrong, not only the count
    if junit.exists() and sum(per_file(junit).values()) > 0:
        files = per_file(junit)
        total = sum(files.values())
        print(f"  test time summed over all files: {total:.1f} s (wall × workers, less the idle); slowest files:")
        for path, spent in files.most_common(args.files):
            print(f"    {spent:7.1f} s  {spent / total:5.1%}  {path}")
    if not args.only:
        figure("the test suite (tests/ + notebooks/), wall" + (", one process" if args.serial else ""),
               seconds / 60, 3.0, "min", higher=False)


if __name__ == "__main__":
    main()
