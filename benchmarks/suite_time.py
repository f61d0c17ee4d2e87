"""Wall time of the whole test suite (``pytest``), and of this issue's own test files.

Runs pytest in fresh processes and prints the figures and pytest's slowest
tests; asserts nothing about time. The whole suite includes notebooks and the
browser test where their tools are installed (``scripts/test`` sets them up).

    .venv/bin/python benchmarks/suite_time.py [--only tests/test_plan.py tests/test_solve.py]
"""
import argparse
import subprocess
import sys
import time


def timed(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    run = subprocess.run(argv, capture_output=True, text=True)
    return time.perf_counter() - start, (run.stdout + run.stderr)


def figure(name: str, value: float, goal: float, unit: str, higher: bool = True) -> None:
    """One line ``benchmarks/all.sh`` collects: the figure beside the issue's goal."""
    met = value >= goal if higher else value <= goal
    print(f"figure: {name}: {value:.3g} {unit} (goal {'≥' if higher else '≤'} {goal:.3g}: {'met' if met else 'NOT met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="time only these test files")
    args = parser.parse_args()
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--durations=8"]  # -q comes from pyproject
    suites = [("tests/test_plan.py tests/test_solve.py", ["tests/test_plan.py", "tests/test_solve.py"])]
    if args.only:
        suites = [(" ".join(args.only), args.only)]
    else:
        suites.append(("whole suite (tests/)", []))
    for name, paths in suites:
        seconds, output = timed(base + paths)
        summary = [line for line in output.splitlines() if " passed" in line or " failed" in line or "error" in line]
        print(f"{name}: {seconds:.1f} s wall — {summary[-1].strip('= ') if summary else 'no summary line'}")
        if not paths:
            figure("the whole test suite (tests/), wall", seconds / 60, 3.0, "min", higher=False)
        slow = output.split("slowest 8 durations")
        if len(slow) > 1:
            print("\n".join("    " + line for line in slow[1].strip().splitlines()[1:9] if line.strip()))


if __name__ == "__main__":
    main()
