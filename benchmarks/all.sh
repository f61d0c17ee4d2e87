#!/usr/bin/env bash
# Every benchmark, in order; each prints its figures (none asserts a time).
#   bash benchmarks/all.sh            (add --suite to also time the whole test suite)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
echo "== sweep throughput (one thread)"; $PY benchmarks/sweep_throughput.py
echo; echo "== plan for 1024 GPUs"; $PY benchmarks/plan_time.py
echo; echo "== cold start"; $PY benchmarks/cold_start.py
echo; echo "== published throughput, measured vs predicted"; $PY benchmarks/throughput.py
echo; echo "== scale: timeline depth, snapshot events, plan GPUs"; $PY benchmarks/scale.py
echo; echo "== side by side with llm-analysis"
if LLA=$(bash benchmarks/setup_llm_analysis.sh 2>/dev/null | tail -1); then
  $PY benchmarks/vs_llm_analysis.py --llm-analysis-python "$LLA"
else
  echo "llm-analysis could not be installed here (needs PyPI); this engine's figures only:"
  $PY benchmarks/vs_llm_analysis.py --llm-analysis-python /nonexistent
fi
if [ "${1:-}" = "--suite" ]; then echo; echo "== test suite"; $PY benchmarks/suite_time.py; fi
