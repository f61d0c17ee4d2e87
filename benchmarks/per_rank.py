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
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


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
            result = "exact" if row.exact else f"off {row.measured - row.billed:+,d} B: {row.reason}"
            print(f"{row.combination:58} {row.quantity:28} {row.measured:>11,d} {row.billed:>11,d}  {result}",
                  flush=True)
    try:
        from symbolic import per_rank_states
    except ImportError:
        per_rank_states = None
    states = []
    if per_rank_states is not None:
        states = per_rank_states.rows()
        for row in states:
            result = "exact" if row.exact else f"off {row.measured - row.billed:+,d} B: {row.reason}"
            print(f"{row.combination:58} {row.quantity:28} {row.measured:>11,d} {row.billed:>11,d}  {result}")
    elapsed = time.perf_counter() - started
    off = [row for row in rows + states if not row.exact]
    unnamed = [row for row in off if not row.reason]
    exact_combinations = sum(1 for c in combinations
                             if all(r.exact for r in rows if r.combination == c.words()))
    print(f"\n{len(rows) + len(states)} rows ({len(rows)} activation rows of {len(combinations)} combinations, "
          f"{len(states)} model-state rows) in {elapsed:.0f} s; {len(off)} off, {len(unnamed)} of them unnamed")
    for row in off:
        print(f"  off: {row.combination} / {row.quantity}: {row.reason or 'NOT NAMED'}")
    print(f"figure: per-rank: {len(combinations)} combinations, {exact_combinations} exact to the byte, "
          f"{len(combinations) - exact_combinations} off")
    return 1 if unnamed else 0


if __name__ == "__main__":
    raise SystemExit(main())
