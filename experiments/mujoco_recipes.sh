#!/usr/bin/env bash
# The two 1M-step, 10-seed MuJoCo recipes, run over many sessions on a machine whose disk may not
# outlive a session: the finished runs' records (`rlkit records`, docs/ablation.md) are kept in
# the repository and restored into the sweep directory before the sweep resumes, so only the runs
# in flight when the machine goes are run again.
#
#   experiments/mujoco_recipes.sh run [FLAGS]  restore the kept records into sweeps/<paper>_mujoco, then
#                                              run (or resume) experiments/outer_ppo/mujoco.toml and then
#                                              experiments/hp3o/mujoco.toml (FLAGS go to rlkit sweep, e.g.
#                                              --retry-failed); output in sweeps/<paper>_mujoco.log
#   experiments/mujoco_recipes.sh keep         the finished runs' records -> experiments/<paper>/mujoco_runs/
#                                              (then commit them); safe while a sweep runs
#   experiments/mujoco_recipes.sh restore      only the restoring step of run
#
# RLKIT_SRC names the checkout whose code and specs the sweeps run (a detached worktree at the
# commit that started them keeps later edits to this checkout out); default: this checkout.
set -u
cd "$(dirname "$(readlink -f "$0")")/.." || exit 2
ROOT=$PWD
SRC=${RLKIT_SRC:-$ROOT}
if [ ! -d "$SRC/rlkit" ]; then
    echo "$0: RLKIT_SRC=$SRC is not an rlkit checkout" >&2
    exit 2
fi
SRC=$(cd "$SRC" && pwd)
PAPERS="outer_ppo hp3o"
RLKIT=${RLKIT:-$ROOT/.venv/bin/rlkit}

rlkit() { PYTHONPATH=$SRC "$RLKIT" "$@"; }

restore() {  # restore PAPER: experiments/PAPER/mujoco_runs -> sweeps/PAPER_mujoco (never overwriting)
    [ -e "experiments/$1/mujoco_runs" ] || return 0
    rlkit records restore "experiments/$1/mujoco_runs" "sweeps/$1_mujoco"
}

keep() {  # keep PAPER: sweeps/PAPER_mujoco -> experiments/PAPER/mujoco_runs
    [ -e "sweeps/$1_mujoco" ] || return 0
    rlkit records keep "sweeps/$1_mujoco" "experiments/$1/mujoco_runs"
}

case "${1:-}" in
    run)
        shift
        mkdir -p sweeps || exit 2
        failed=0
        for paper in $PAPERS; do
            restore "$paper" || exit $?
            echo "--- $(date -u '+%F %T') rlkit sweep experiments/$paper/mujoco.toml (code: $SRC)" >> "sweeps/${paper}_mujoco.log"
            rlkit sweep "$SRC/experiments/$paper/mujoco.toml" --out "sweeps/${paper}_mujoco" "$@" \
                >> "sweeps/${paper}_mujoco.log" 2>&1
            rc=$?
            # 1: some runs failed (recorded; --retry-failed runs them again): the next recipe still runs
            [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || exit "$rc"
            [ "$rc" -eq 0 ] || failed=1
        done
        exit "$failed" ;;
    keep|restore)
        status=0
        for paper in $PAPERS; do "$1" "$paper" || status=$?; done
        exit "$status" ;;
    *)
        echo "usage: $0 run [rlkit sweep flags] | keep | restore" >&2
        exit 2 ;;
esac
