"""Proved per rank: every combination of the grid run as one rank of PyTorch's own parallel code, against the bill.

    .venv/bin/python benchmarks/per_rank.py [--family llama] [--dims first] [--quick]

Each combination (``symbolic.per_rank.grid``: three tiny models at two dimension sets × t ∈ {1, 2, 4} × SP ×
no/full recompute × HF's eager loss or the vocabulary-parallel one × PEFT LoRA with fp32 or bf16 adapters) is
run as rank r of a fake process group — ``torch.distributed.tensor.parallel``'s ColwiseParallel /
RowwiseParallel / SequenceParallel with torchtitan's placements, ``checkpoint_wrapper`` as torchtitan's full
AC, PEFT's ``get_peft_model``, ``loss_parallel`` — and what the rank saves for backward (one decoder layer,
and the output side) is compared byte for byte with the bill of the same layout. Where the model-states grid
(``symbolic.per_rank_states``) is present, its rows are printed too.

The last line is the figure: ``figure: per-rank: N combinations, K exact to the byte, M off`` — the rows that
are off each named with the mechanism that makes them differ.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _bytes(value) -> str:
    """A byte count as printed: an integer with thousands separators; a first-order share Ψ/d the bill keeps
    as a fraction, as ``a + p/q``."""
    from fractions import Fraction

    value = Fraction(value)
    whole = f"{int(value):,d}"
    return whole if value.denominator == 1 else f"{whole}+{value - int(value)}"


def _line(row) -> str:
    result = "exact" if row.exact else f"off {_bytes(row.measured - row.billed)} B: {row.reason}"
    return f"{row.combination:58} {row.quantity:28} {_bytes(row.measured):>11} {_bytes(row.billed):>11}  {result}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", help="only these families (repeatable)")
    parser.add_argument("--dims", action="append", help="only these dimension sets: first, second")
    parser.add_argument("--quick", action="store_true", help="the first dimension set only")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    from symbolic import per_rank

    families = tuple(args.family or per_rank.CONFIGS)
    dims = tuple(args.dims or (("first",) if args.quick else ("first", "second")))
    started = time.perf_counter()
    combinations = per_rank.grid(families, dims)
    rows = []
    print(f"{'combination':58} {'quantity':28} {'measured B':>11} {'billed B':>11}  result")
    for combination in combinations:
        for row in per_rank.rows([combination]):
            rows.append(row)
            print(_line(row), flush=True)
    try:
        from symbolic import per_rank_states
    except ImportError:
        per_rank_states = None
    states = []
    if per_rank_states is not None:
        states = per_rank_states.rows(families=tuple(f for f in per_rank_states.FAMILIES if f in families))
        for row in states:
            print(_line(row))
    elapsed = time.perf_counter() - started
    off = [row for row in rows + states if not row.exact]
    unnamed = [row for row in off if not row.reason]
    # a combination is exact when every quantity of it is (one layout of one model on one rank)
    names = list(dict.fromkeys(row.combination for row in rows + states))
    exact = [name for name in names if all(row.exact for row in rows + states if row.combination == name)]
    print(f"\n{len(rows) + len(states)} rows ({len(rows)} activation rows of {len(combinations)} combinations, "
          f"{len(states)} model-state rows) in {elapsed:.0f} s; {len(off)} rows off, {len(unnamed)} of them unnamed")
    # the mechanisms, each once: a reason's words with its sizes and ranks taken out
    reasons = {}
    for row in off:
        words = row.reason.removeprefix("the lines' differences: ") if row.reason else "NOT NAMED"
        key = re.sub(r"\b\d[\d,/.]*\b", "N", words.split(" (")[0].split(";")[0])
        reasons.setdefault(key, []).append(row)
    for key, group in reasons.items():
        print(f"  off ({len(group)} rows): {key}")
    print(f"figure: per-rank: {len(names)} combinations, {len(exact)} exact to the byte, {len(names) - len(exact)} off "
          f"(every row off named with its mechanism: {'yes' if not unnamed else 'NO'})")
    return 1 if unnamed else 0


if __name__ == "__main__":
    raise SystemExit(main())
