"""experiments/mujoco_recipes.sh: the finished runs' records it keeps in the repository bring a
new sweep directory back to the same state (every kept run done, the same tables), restoring never
overwrites what a sweep wrote, and a run in flight is not kept."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rlkit.ablation.results import write_tables
from rlkit.ablation.sweep import plan, run_sweep

ROOT = Path(__file__).parents[2]
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


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A repository's layout with the script and one finished two-run sweep as outer_ppo's recipe."""
    root = tmp_path_factory.mktemp("repo")
    (root / "experiments").mkdir()
    shutil.copy(ROOT / "experiments" / "mujoco_recipes.sh", root / "experiments")
    spec = root / "spec.toml"
    spec.write_text(SPEC)
    run_sweep(str(spec), out=str(root / "sweeps" / "outer_ppo_mujoco"), workers=1, pack="1")
    return root


def script(root: Path, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(root / "experiments" / "mujoco_recipes.sh"), command],
                          capture_output=True, text=True, timeout=60)


def table(sweep: Path) -> str:
    return (sweep / "runs.csv").read_text() + (sweep / "results.csv").read_text()


def test_kept_records_restore_a_sweep_to_the_same_state(repo, tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(repo, root)
    sweep, kept = root / "sweeps" / "outer_ppo_mujoco", root / "experiments" / "outer_ppo" / "mujoco_runs"
    spec_path = str(root / "spec.toml")
    spec, _, states = plan(spec_path, str(sweep))
    assert [state for _, state in states] == ["done", "done"]
    write_tables(sweep, spec)
    before = table(sweep)

    kept_out = script(root, "keep")
    assert kept_out.returncode == 0, kept_out.stderr
    assert "2 finished runs kept" in kept_out.stdout
    assert sorted(p.relative_to(kept).as_posix() for p in kept.rglob("*") if p.is_file()) == sorted(
        ["manifest.json"] + [f"runs/{run.name}/result.json" for run in spec.runs]
        + [f"status/{run.name}.json" for run in spec.runs])

    shutil.rmtree(root / "sweeps")
    assert script(root, "restore").returncode == 0
    _, _, states = plan(spec_path, str(sweep))
    assert [state for _, state in states] == ["done", "done"]
    write_tables(sweep, spec)
    assert table(sweep) == before


def test_restoring_overwrites_nothing_and_a_run_in_flight_is_not_kept(repo, tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(repo, root)
    sweep, kept = root / "sweeps" / "outer_ppo_mujoco", root / "experiments" / "outer_ppo" / "mujoco_runs"
    in_flight = sweep / "runs" / "ppo__CartPole-v1__s3"
    in_flight.mkdir()
    (in_flight / "checkpoint.json").write_text("{}")
    assert script(root, "keep").returncode == 0
    assert not (kept / "runs" / in_flight.name).exists()

    first = next(sweep.glob("runs/*/result.json"))
    written = json.loads(first.read_text())
    (kept / first.relative_to(sweep)).write_text(json.dumps({**written, "eval_return_mean": -1.0}))
    assert script(root, "restore").returncode == 0
    assert json.loads(first.read_text()) == written


def test_an_unknown_command_is_refused_with_its_usage(repo):
    out = script(repo, "sweep")
    assert out.returncode == 2
    assert "usage:" in out.stderr and "run|keep|restore" in out.stderr
