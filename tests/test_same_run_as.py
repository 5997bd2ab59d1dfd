"""checks/same_run_as.py: an earlier revision's run beside the current code's, number for number."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("same_run_as", ROOT / "checks" / "same_run_as.py")
same_run_as = importlib.util.module_from_spec(spec)
spec.loader.exec_module(same_run_as)


def test_differences_names_each_evaluation_that_differs_or_is_missing():
    before = [[10, 5.0, 1.0], [20, 6.0, 1.0], [30, 7.0, 0.5]]
    after = [[10, 5.0, 1.0], [20, 6.5, 1.0]]
    assert same_run_as.differences(before, after) == ["step 20: [6.0, 1.0] -> [6.5, 1.0]",
                                                      "step 30: [7.0, 0.5] -> None"]
    assert same_run_as.differences(before, [list(r) for r in before]) == []


def test_the_current_revision_trains_the_same_run_as_itself():
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    done = subprocess.run([sys.executable, str(ROOT / "checks" / "same_run_as.py"), "HEAD", "--", "--preset",
                           "cartpole", "--total-steps", "1024", "--eval-every", "512", "--eval-episodes", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[0])
    assert found["same"] and found["evaluations"] == 2 and found["final"]["rev"] == found["final"]["current"]
    worktrees = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    assert "same-run-" not in worktrees  # the temporary worktree is gone


def test_a_recorded_config_becomes_the_flags_that_give_it():
    config = {"env": "Hopper-v5", "seed": 3, "anneal_lr": True, "norm_obs": False, "hidden_sizes": [64, 64],
              "target_kl": None, "env_kwargs": "", "logdir": "runs", "progress": True, "total_steps": 300000,
              "eval_every": 50000}
    assert same_run_as.flags(config) == ["--env", "Hopper-v5", "--seed", "3", "--anneal-lr", "--no-norm-obs",
                                         "--hidden-sizes", "64", "64", "--total-steps", "300000",
                                         "--eval-every", "50000"]
    short = same_run_as.flags(config, total_steps=20000)
    assert short[-4:] == ["--total-steps", "20000", "--eval-every", "10000"]


def test_a_manifest_run_that_is_not_rlkits_or_not_there_is_refused(tmp_path):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"git_commit": "abc", "runs": {"sb3-ppo__E__s1": ["sb3", {}]}}))
    with pytest.raises(SystemExit, match="is a sb3 run"):
        same_run_as.from_manifest(manifest, "sb3-ppo__E__s1", None)
    with pytest.raises(SystemExit, match="has no run 'x'"):
        same_run_as.from_manifest(manifest, "x", None)
