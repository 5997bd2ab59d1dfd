#!/usr/bin/env bash
# Every timed benchmark, strictly one after another; each replaces its figure in benchmarks/README.md.
# Run on an otherwise idle machine (nothing else may hold a core while these run).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
$PY benchmarks/throughput.py
$PY benchmarks/variants.py overhead --preset cartpole --updates 10 --repeats 15
$PY benchmarks/variants.py overhead --preset mujoco --updates 1 --repeats 7
$PY benchmarks/llm_rollout.py --batch 8 --new-tokens 32 --repeats 5
$PY benchmarks/llm_vs_trl.py --iterations 4
