#!/usr/bin/env bash
# A separate virtual environment with llm-analysis (PyPI), for benchmarks/vs_llm_analysis.py only.
# It is no dependency of symbolic or of its tests: llm-analysis 0.2.2 pulls transformers 4.31, which must
# not land in the project's environment.
set -euo pipefail
VENV="${LLM_ANALYSIS_VENV:-$HOME/.cache/symbolic-bench/llm-analysis}"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import llm_analysis" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "llm-analysis==0.2.2"
fi
echo "$VENV/bin/python"
