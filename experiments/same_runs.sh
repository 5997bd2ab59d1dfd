#!/usr/bin/env bash
# Does today's code compute the runs of every committed report that has no records of its own? For
# each report, the seed-1 run of each rlkit variant is trained, shortened to 20,480 steps (4,096 on
# Atari), with the code the sweep ran (its recorded commit, or the commit a variant was added or last
# changed at) and with today's code built from the recipe as committed now; one JSON line per run from
# checks/same_run_as.py, "same": true when every evaluation is equal. Compare on one machine only.
# Usage: bash experiments/same_runs.sh > same_runs.jsonl
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}

check() {  # REPORT_DIR RECIPE [VARIANT=REV ...]  (ALL=REV: every variant)
    local report=$1 recipe=$2 steps=20480
    shift 2
    case $report in *atari) steps=4096 ;; esac
    for run in $("$python" - "$report/manifest.json" <<'PY'
import json, sys
seen = set()
for name, (kind, config) in json.load(open(sys.argv[1]))["runs"].items():
    variant = name.split("__")[0]
    if kind == "rlkit" and config.get("seed") == 1 and variant not in seen:
        seen.add(variant)
        print(name)
PY
    ); do
        local rev=""
        for pin in "$@"; do
            if [ "${pin%%=*}" = "${run%%__*}" ] || [ "${pin%%=*}" = "ALL" ]; then rev=${pin#*=}; fi
        done
        "$python" checks/same_run_as.py $rev --manifest "$report/manifest.json" --run "$run" --recipe "$recipe" \
            --total-steps $steps | head -1
    done
}

check experiments/outer_ppo/results experiments/outer_ppo/cartpole.toml mu0.9-anneal=b5d597f \
    mu0.9-nesterov-anneal=b5d597f biased-update-alpha0.5=b5d597f biased-update-nesterov-alpha0.5=b5d597f
check experiments/outer_ppo/biased_init experiments/outer_ppo/biased_init.toml
check experiments/hp3o/results experiments/hp3o/cartpole.toml
check experiments/hp3o/fidelity experiments/hp3o/fidelity_cartpole.toml hp3o+-paper=4aa4db4
check experiments/hp3o/timing experiments/hp3o/timing_cartpole.toml
check experiments/hp3o/fidelity_hopper experiments/hp3o/fidelity_hopper.toml
check experiments/hp3o/isolate_hopper experiments/hp3o/isolate_hopper.toml ALL=7c956c6  # its spec as extended
check experiments/hp3o/halfcheetah experiments/hp3o/halfcheetah.toml
check experiments/mujoco_reduced experiments/mujoco_reduced.toml
check experiments/parity/lunarlander experiments/parity/lunarlander.toml
check experiments/parity/minatar_1m experiments/parity/minatar_1m.toml
check experiments/parity/atari experiments/parity/atari.toml
