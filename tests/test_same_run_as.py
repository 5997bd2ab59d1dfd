"""checks/same_run_as.py: an earlier revision's run beside the current code's, number for number."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
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


def _manifest(tmp_path, spec, runs, **extra):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"git_commit": "abc", "spec": spec, "runs": runs, **extra}))
    return path


def test_grid_points_odd_names_tables_and_budgets_become_the_runs_flags(tmp_path):
    spec = {"name": "t", "envs": ["CartPole-v1"], "seeds": 1, "preset": "cartpole", "env_kwargs": {"sutton_barto_reward": True},
            "variants": {"ppo": {}, "a b": {"clip_coef": 0.3}, "x__y": {"gamma": 0.9}}, "grid": {"ent_coef": [0.0, 0.01]},
            "smoke": {"envs": ["CartPole-v1"], "total_steps": 512, "num_steps": 64}}
    runs = {f"{v}__CartPole-v1__s1": ["rlkit", {"env": "CartPole-v1", "seed": 1}]
            for v in ("ppo-ent_coef=0.0-", "a-b-ent_coef=0.01-", "x__y-ent_coef=0.0-")}
    manifest = _manifest(tmp_path, spec, runs, budget="smoke")
    _, args, _ = same_run_as.from_manifest(manifest, "a-b-ent_coef=0.01-__CartPole-v1__s1", None)
    assert args[args.index("--clip-coef") + 1] == "0.3" and args[args.index("--ent-coef") + 1] == "0.01"
    assert json.loads(args[args.index("--env-kwargs") + 1]) == {"sutton_barto_reward": True}
    assert args[args.index("--total-steps") + 1] == "512" and args[args.index("--num-steps") + 1] == "64"
    assert "--envs" not in args
    _, args, _ = same_run_as.from_manifest(manifest, "x__y-ent_coef=0.0-__CartPole-v1__s1", None)
    assert args[args.index("--gamma") + 1] == "0.9"
    other = tmp_path / "other.toml"
    other.write_text('name = "u"\n[variants]\nppo = {}\n')
    with pytest.raises(SystemExit, match="recipe of 'u'"):
        same_run_as.from_manifest(manifest, "ppo-ent_coef=0.0-__CartPole-v1__s1", None, other)


@pytest.mark.parametrize("argv, says", [
    (["nosuchrev", "--", "--preset", "cartpole"], "cannot check out 'nosuchrev'"),
    (["HEAD"], "give REV -- TRAIN_ARGS"),
    (["HEAD", "--total-steps", "9", "--", "--preset", "cartpole"], "go with --manifest"),
    (["--manifest", "no/such.json", "--run", "r"], "cannot read no/such.json"),
    (["--manifest", "MANIFEST", "--run", "r"], "records no commit"),
    (["--manifest", "BAD", "--run", "r"], "cannot read"),
])
def test_errors_are_one_line_and_exit_2(argv, says, tmp_path):
    (tmp_path / "bad.json").write_text("{")
    _manifest(tmp_path, {"name": "t", "variants": {"r": {}}}, {"r": ["rlkit", {"env": "E", "seed": 1}]}, git_commit=None)
    argv = [str(tmp_path / "manifest.json") if a == "MANIFEST" else str(tmp_path / "bad.json") if a == "BAD" else a
            for a in argv]
    done = subprocess.run([sys.executable, str(ROOT / "checks" / "same_run_as.py"), *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_sigterm_removes_the_worktree_and_stops_the_training(tmp_path):
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    proc = subprocess.Popen([sys.executable, str(ROOT / "checks" / "same_run_as.py"), "HEAD", "--", "--preset",
                             "cartpole", "--total-steps", "10000000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "TMPDIR": str(tmp_path)}, start_new_session=True)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("same-run-*/runs/before")) and time.monotonic() < deadline:
        time.sleep(0.2)  # polls for the event: the training's run folder exists, so it is under way
    assert list(tmp_path.glob("same-run-*/runs/before")), "the training never started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    listed = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    assert str(tmp_path) not in listed and not list(tmp_path.glob("same-run-*"))
    assert subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True).returncode == 1  # no training left
