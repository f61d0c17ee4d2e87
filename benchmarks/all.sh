#!/usr/bin/env bash
# Every benchmark, in order; each prints its figures (none asserts a time), and at the end every
# figure of issue 24 beside its goal, with the date and the machine (the README's performance table
# is this last block).
#   bash benchmarks/all.sh            (add --suite to also time the whole test suite)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
LLA=$(bash benchmarks/setup_llm_analysis.sh 2>/dev/null | tail -1) || LLA=/nonexistent
[ -x "$LLA" ] || echo "llm-analysis could not be installed here (needs PyPI): this engine's figures only"
{
  echo "== sweep throughput (one thread)"; $PY benchmarks/sweep_throughput.py
  echo; echo "== plan for 1024 GPUs"; $PY benchmarks/plan_time.py
  echo; echo "== cold start"; $PY benchmarks/cold_start.py --llm-analysis-python "$LLA"
  echo; echo "== published throughput, measured vs predicted"; $PY benchmarks/throughput.py
  echo; echo "== scale: timeline depth, snapshot events, plan GPUs"; $PY benchmarks/scale.py
  echo; echo "== side by side with llm-analysis"; $PY benchmarks/vs_llm_analysis.py --llm-analysis-python "$LLA"
  echo; echo "== proved per rank (issue 39)"; $PY benchmarks/per_rank.py | tail -25
  if [ "${1:-}" = "--suite" ]; then echo; echo "== test suite"; $PY benchmarks/suite_time.py; fi
} 2>&1 | tee "$LOG"
echo
echo "== issue 24's figures beside their goals ($(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores, \
$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load average $(cut -d' ' -f1-3 /proc/loadavg))"
grep '^figure: ' "$LOG" | sed 's/^figure: /- /'
