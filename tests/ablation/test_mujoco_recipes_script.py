"""experiments/mujoco_recipes.sh: keep and restore go through ``rlkit records`` for both recipes
(a round trip restores the finished runs), run restores before it runs the two recipes in order
with the flags given, goes on past failed runs but not past an interrupt, and bad input is refused."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlkit.ablation.sweep import plan, run_sweep

ROOT = Path(__file__).parents[2]
RLKIT = Path(sys.executable).parent / "rlkit"
SPEC = """
name = "t"
envs = ["CartPole-v1"]
seeds = 2
preset = "cartpole"
total_steps = 512
num_envs = 2
num_steps = 128
eval_every = 256
eval_episodes = 2

[variants]
ppo = {}
"""


@pytest.fixture
def repo(tmp_path):
    """A repository's layout with the script."""
    (tmp_path / "experiments").mkdir()
    shutil.copy(ROOT / "experiments" / "mujoco_recipes.sh", tmp_path / "experiments")
    return tmp_path


def script(root: Path, *args: str, rlkit: Path = RLKIT, src: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "RLKIT": str(rlkit), "RLKIT_SRC": str(src)}
    return subprocess.run(["bash", str(root / "experiments" / "mujoco_recipes.sh"), *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=root)


@pytest.mark.skipif(not RLKIT.exists(), reason="needs the rlkit command beside this Python")
def test_keep_then_restore_brings_both_recipes_finished_runs_back(repo):
    (repo / "spec.toml").write_text(SPEC)
    for paper in ("outer_ppo", "hp3o"):
        run_sweep(str(repo / "spec.toml"), out=str(repo / "sweeps" / f"{paper}_mujoco"), workers=1, pack="1",
                  progress=False)
    kept = script(repo, "keep")
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.count('"copied": 2') == 2
    shutil.rmtree(repo / "sweeps")
    restored = script(repo, "restore")
    assert restored.returncode == 0, restored.stderr
    for paper in ("outer_ppo", "hp3o"):
        _, _, states = plan(str(repo / "spec.toml"), str(repo / "sweeps" / f"{paper}_mujoco"))
        assert [state for _, state in states] == ["done", "done"]


def stub(root: Path, codes: dict[str, int]) -> Path:
    """An rlkit that logs each call's arguments and exits with the code given for its recipe."""
    path = root / "stub-rlkit"
    cases = "".join(f'    *{paper}/mujoco.toml*) exit {code} ;;\n' for paper, code in codes.items())
    path.write_text(f'#!/usr/bin/env bash\necho "$*" >> "{root}/calls"\ncase "$*" in\n{cases}esac\nexit 0\n')
    path.chmod(0o755)
    return path


def calls(root: Path) -> list[str]:
    return (root / "calls").read_text().splitlines() if (root / "calls").exists() else []


def test_run_restores_then_runs_the_two_recipes_in_order_with_the_flags(repo):
    for paper in ("outer_ppo", "hp3o"):
        (repo / "experiments" / paper / "mujoco_runs").mkdir(parents=True)
    out = script(repo, "run", "--retry-failed", rlkit=stub(repo, {}))
    assert out.returncode == 0, out.stderr
    assert calls(repo) == [
        "records restore experiments/outer_ppo/mujoco_runs sweeps/outer_ppo_mujoco",
        f"sweep {ROOT}/experiments/outer_ppo/mujoco.toml --out sweeps/outer_ppo_mujoco --retry-failed",
        "records restore experiments/hp3o/mujoco_runs sweeps/hp3o_mujoco",
        f"sweep {ROOT}/experiments/hp3o/mujoco.toml --out sweeps/hp3o_mujoco --retry-failed"]


def test_run_goes_on_past_failed_runs_but_stops_at_an_interrupt(repo):
    out = script(repo, "run", rlkit=stub(repo, {"outer_ppo": 1}))
    assert out.returncode == 1
    assert [c.split()[1] for c in calls(repo)] == [f"{ROOT}/experiments/outer_ppo/mujoco.toml",
                                                   f"{ROOT}/experiments/hp3o/mujoco.toml"]
    (repo / "calls").unlink()
    out = script(repo, "run", rlkit=stub(repo, {"outer_ppo": 130}))
    assert out.returncode == 130
    assert len(calls(repo)) == 1


def test_a_restore_that_fails_stops_the_run(repo):
    (repo / "experiments" / "outer_ppo" / "mujoco_runs").mkdir(parents=True)
    failing = repo / "failing-rlkit"
    failing.write_text(f'#!/usr/bin/env bash\necho "$*" >> "{repo}/calls"\n[ "$1" != records ] || exit 2\n')
    failing.chmod(0o755)
    assert script(repo, "run", rlkit=failing).returncode == 2
    assert calls(repo) == ["records restore experiments/outer_ppo/mujoco_runs sweeps/outer_ppo_mujoco"]


def test_bad_input_is_refused(repo, tmp_path):
    out = script(repo, "sweep")
    assert out.returncode == 2 and "usage:" in out.stderr
    out = script(repo, "keep", src=tmp_path / "nowhere")
    assert out.returncode == 2 and "is not an rlkit checkout" in out.stderr
