#!/usr/bin/env bash
# The committed ablation reproductions: each recipe's sweep (resumable: finished runs are skipped),
# its report, and the files copied to experiments/<...>/ (report.md, summary.json, figures, tables,
# manifest). On a fresh machine this is many CPU-hours (benchmarks/archive/RESULTS-log.md records
# what each took); run it in the background with `setsid nohup bash experiments/reproductions.sh &`.
# Runs are bit-for-bit repeatable on one CPU kind only: vector kernels round differently on another
# (float rounding differs between CPU kinds), so a re-run elsewhere gives other numbers,
# not the committed ones.
# Usage: bash experiments/reproductions.sh [WORKERS [SPEC ...]]   (sweep directories: $SWEEPS, default
# sweeps/); naming specs (e.g. experiments/hp3o/timing_cartpole.toml) reproduces only those.
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${1:-2}
only=("${@:2}")
sweeps=${SWEEPS:-sweeps}
rlkit=${RLKIT:-.venv/bin/rlkit}

reproduce() {  # SPEC SWEEP_DIR RESULTS_DIR [BASELINE]
    if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " == *" $1 "* ]]; then return; fi
    "$rlkit" sweep "$1" --out "$2" --workers "$workers"
    "$rlkit" report "$2" --baseline "${4:-ppo}" > /dev/null
    mkdir -p "$3"
    cp "$2"/report/* "$3"/
    cp "$2"/results.csv "$2"/runs.csv "$2"/manifest.json "$3"/
    echo "reproduced $1 -> $3"
}

reproduce experiments/outer_ppo/cartpole.toml "$sweeps/outer_ppo_cartpole" experiments/outer_ppo/results
reproduce experiments/hp3o/cartpole.toml "$sweeps/hp3o_cartpole_v2" experiments/hp3o/results
reproduce experiments/hp3o/fidelity_cartpole.toml "$sweeps/hp3o_fidelity_cartpole_v2" experiments/hp3o/fidelity
reproduce experiments/hp3o/fidelity_hopper.toml "$sweeps/hp3o_fidelity_hopper" experiments/hp3o/fidelity_hopper
reproduce experiments/mujoco_reduced.toml "$sweeps/mujoco_reduced" experiments/mujoco_reduced
reproduce experiments/hp3o/isolate_hopper.toml "$sweeps/hp3o_isolate_hopper" experiments/hp3o/isolate_hopper paper-base
reproduce experiments/hp3o/timing_cartpole.toml "$sweeps/hp3o_timing_cartpole" experiments/hp3o/timing hp3o-paper
