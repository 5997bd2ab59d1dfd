#!/usr/bin/env bash
# The two 1M-step, 10-seed MuJoCo recipes, run over many sittings on a machine whose disk may not
# outlive the sitting: the finished runs' records are kept in the repository and restored into
# the sweep directory before the sweep resumes, so only the runs in flight are ever lost.
#
#   experiments/mujoco_recipes.sh run    restore the kept records into sweeps/, then run (or resume)
#                                        experiments/outer_ppo/mujoco.toml and, once it has finished,
#                                        experiments/hp3o/mujoco.toml; output in sweeps/<name>.log
#   experiments/mujoco_recipes.sh keep   copy each finished run's records into
#                                        experiments/<paper>/mujoco_runs/ (then commit them)
#   experiments/mujoco_recipes.sh restore   only the restoring step of run
#
# A kept run is its result.json (the evaluations and throughput that results.csv, runs.csv and
# rlkit report read) and its status file, beside the sweep's manifest.json; its TensorBoard
# events and checkpoints stay in sweeps/. Restoring copies only what the sweep directory lacks,
# so nothing a sweep wrote is overwritten. RLKIT_SRC names the checkout whose code the sweeps run
# (a detached worktree keeps edits to this one out of a running sweep); default: this checkout.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
SRC=${RLKIT_SRC:-$ROOT}
PAPERS="outer_ppo hp3o"

restore() {  # restore <paper>: kept records -> sweeps/<paper>_mujoco, missing files only
    local kept=experiments/$1/mujoco_runs sweep=sweeps/$1_mujoco
    [ -f "$kept/manifest.json" ] || return 0
    mkdir -p "$sweep"
    (cd "$kept" && find . -type f -name '*.json' -print0) | while IFS= read -r -d '' file; do
        [ -e "$sweep/$file" ] || { mkdir -p "$(dirname "$sweep/$file")" && cp "$kept/$file" "$sweep/$file"; }
    done
}

keep() {  # keep <paper>: each finished run of sweeps/<paper>_mujoco -> experiments/<paper>/mujoco_runs
    local kept=experiments/$1/mujoco_runs sweep=sweeps/$1_mujoco
    [ -f "$sweep/manifest.json" ] || return 0
    mkdir -p "$kept/runs" "$kept/status"
    cp "$sweep/manifest.json" "$kept/manifest.json"
    for result in "$sweep"/runs/*/result.json; do
        [ -f "$result" ] || continue
        local run
        run=$(basename "$(dirname "$result")")
        mkdir -p "$kept/runs/$run"
        cp "$result" "$kept/runs/$run/result.json"
        [ -f "$sweep/status/$run.json" ] && cp "$sweep/status/$run.json" "$kept/status/$run.json"
    done
    echo "$kept: $(find "$kept/runs" -name result.json | wc -l) finished runs kept"
}

case "${1:-}" in
    run)
        mkdir -p sweeps
        for paper in $PAPERS; do
            restore "$paper"
            echo "--- $(date -u '+%F %T') rlkit sweep experiments/$paper/mujoco.toml (code: $SRC)" >> "sweeps/${paper}_mujoco.log"
            PYTHONPATH=$SRC "$ROOT/.venv/bin/rlkit" sweep "$ROOT/experiments/$paper/mujoco.toml" \
                --out "sweeps/${paper}_mujoco" >> "sweeps/${paper}_mujoco.log" 2>&1 || exit $?
        done ;;
    keep)
        for paper in $PAPERS; do keep "$paper"; done ;;
    restore)
        for paper in $PAPERS; do restore "$paper"; done ;;
    *)
        echo "usage: $0 run|keep|restore" >&2
        exit 2 ;;
esac
