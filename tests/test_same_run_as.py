"""checks/same_run_as.py: an earlier revision's run beside the current code's, number for number."""

import importlib.util
import json
import os
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


def test_the_current_revision_trains_the_same_run_as_itself(tmp_path):
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    done = subprocess.run([sys.executable, str(ROOT / "checks" / "same_run_as.py"), "HEAD", "--", "--preset",
                           "cartpole", "--total-steps", "1024", "--eval-every", "512", "--eval-episodes", "1"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[0])
    assert found["same"] and found["evaluations"] == 2 and found["final"]["rev"] == found["final"]["current"]
    listed = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    assert str(tmp_path) not in listed and not list(tmp_path.glob("same-run-*"))  # its worktree is gone


def test_a_manifest_run_becomes_the_flags_its_spec_builds_it_from(tmp_path):
    spec = {"name": "t", "envs": ["CartPole-v1", "Hopper-v5"], "seeds": 2, "preset": "mujoco", "total_steps": 300000,
            "eval_every": 50000, "norm_obs": False, "env": {"CartPole-v1": {"preset": "cartpole", "total_steps": 100000}},
            "variants": {"ppo": {}, "o": {"presets": ["outer-biased"], "outer_grad_from": "theta",
                                         "hidden_sizes": [32, 32]}, "sb3:ppo": {}}, "baseline": "ppo"}
    runs = {"o__CartPole-v1__s2": ["rlkit", {"env": "CartPole-v1", "seed": 2}],
            "o__Hopper-v5__s1": ["rlkit", {"env": "Hopper-v5", "seed": 1}],
            "sb3-ppo__Hopper-v5__s1": ["sb3", {"env": "Hopper-v5", "seed": 1}]}
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"git_commit": "abc", "spec": spec, "runs": runs}))
    rev, args, now = same_run_as.from_manifest(manifest, "o__CartPole-v1__s2", None)
    assert rev == "abc" and now == args and args == ["--preset", "cartpole", "outer-biased", "--total-steps", "100000",
                                     "--eval-every", "50000", "--no-norm-obs", "--outer-grad-from", "theta",
                                     "--hidden-sizes", "32", "32", "--env", "CartPole-v1", "--seed", "2"]
    _, short, _ = same_run_as.from_manifest(manifest, "o__Hopper-v5__s1", 20000)
    assert short[:3] == ["--preset", "mujoco", "outer-biased"]
    assert short[short.index("--total-steps") + 1] == "20000" and short[short.index("--eval-every") + 1] == "10000"
    recipe = tmp_path / "recipe.toml"  # the recipe now pins another field for o
    recipe.write_text('name = "t"\npreset = "mujoco"\n[variants]\no = { presets = ["outer-biased"], '
                      'outer_grad_from = "start" }\n')
    _, then, now = same_run_as.from_manifest(manifest, "o__Hopper-v5__s1", None, recipe)
    assert "theta" in then and now == ["--preset", "mujoco", "outer-biased", "--outer-grad-from", "start",
                                       "--env", "Hopper-v5", "--seed", "1"]
    with pytest.raises(SystemExit, match="is a sb3 run"):
        same_run_as.from_manifest(manifest, "sb3-ppo__Hopper-v5__s1", None)
    with pytest.raises(SystemExit, match="has no run 'x'"):
        same_run_as.from_manifest(manifest, "x", None)
