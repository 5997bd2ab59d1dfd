"""``rlkit sweep`` end to end: outputs, baselines in the same tables, resuming (after kill -9 too),
failed runs, refusing another spec, and ``rlkit report`` on what finished."""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlkit.ablation.report import write_report
from rlkit.ablation.sweep import run_sweep
from rlkit.cli import main
from rlkit.errors import ConfigError
from tests.processes import children, wait_gone, wait_until

ROOT = Path(__file__).parents[2]
SPEC = """
name = "t"
envs = ["CartPole-v1"]
seeds = 2
preset = "cartpole"
total_steps = 1024
num_envs = 2
num_steps = 128
eval_every = 512
eval_episodes = 2
checkpoint_every = 256

[variants]
ppo = {}
outer = { presets = ["outer-nesterov"] }
"sb3:ppo" = {}
"sb3-contrib:trpo" = {}

[reference."CartPole-v1"]
random = 22.0
reference = 500.0
"""


def write_spec(tmp_path, text=SPEC, name="spec.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    spec = write_spec(tmp)
    summary = run_sweep(spec, str(tmp / "out"), workers=2, progress=False)
    return spec, tmp / "out", summary


def test_a_sweep_writes_runs_tables_manifest_and_logs(finished):
    _, out, summary = finished
    assert (summary.total, summary.done, summary.failed, summary.ran) == (8, 8, 0, 8)
    runs = rows(out / "runs.csv")
    assert {r["kind"] for r in runs} == {"rlkit", "sb3:ppo", "sb3-contrib:trpo"}
    assert all(r["status"] == "done" and float(r["final_return"]) > 0 for r in runs)
    results = rows(out / "results.csv")
    assert list(results[0]) == ["variant", "env", "seed", "kind", "step", "wall_s", "eval_return_mean",
                                "eval_return_std"]
    assert sorted({int(r["step"]) for r in results}) == [512, 1024] and len(results) == 16
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["spec"]["name"] == "t" and manifest["packages"]["torch"] and "git_commit" in manifest
    assert len(list((out / "logs").glob("*.log"))) == 8
    assert len(list((out / "runs").glob("*/events.out.tfevents.*"))) == 8  # one TensorBoard logdir


def test_the_same_command_again_runs_nothing_and_another_spec_is_refused(finished, tmp_path):
    spec, out, _ = finished
    before = (out / "results.csv").read_text()
    assert run_sweep(spec, str(out), workers=2, progress=False).ran == 0
    assert (out / "results.csv").read_text() == before
    other = write_spec(tmp_path, SPEC.replace("total_steps = 1024", "total_steps = 2048"))
    with pytest.raises(ConfigError, match=r"another config \(total_steps 1024 -> 2048: a different spec"):
        run_sweep(other, str(out), workers=2, progress=False)
    fewer = write_spec(tmp_path, SPEC.replace("seeds = 2", "seeds = 1"))  # drops runs: not an extension
    with pytest.raises(ConfigError, match="different spec"):
        run_sweep(fewer, str(out), workers=2, progress=False)
    assert (out / "results.csv").read_text() == before


def test_a_preset_redefined_since_the_sweep_started_is_refused(finished, monkeypatch):
    """Same spec text, but a preset now means other settings: resuming would mix stale results in."""
    from rlkit.gym import config

    spec, out, _ = finished
    manifest = (out / "manifest.json").read_text()
    monkeypatch.setitem(config.PRESETS, "outer-nesterov", {**config.PRESETS["outer-nesterov"], "outer_momentum": 0.9})
    with pytest.raises(ConfigError, match="outer__CartPole-v1__s1 would now run with another config "
                                          r"\(outer_momentum 0.5 -> 0.9: a preset changed"):
        run_sweep(spec, str(out), workers=2, progress=False)
    assert (out / "manifest.json").read_text() == manifest


def test_fields_added_to_rlkit_since_the_sweep_started_do_not_block_it(finished, tmp_path):
    """A stored run config that lacks a field (written by an older rlkit) counts it as its default."""
    spec = finished[0]
    out = tmp_path / "copy"
    shutil.copytree(finished[1], out)
    manifest = json.loads((out / "manifest.json").read_text())
    for _, config in manifest["runs"].values():
        del config["hp3o_advantages"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert run_sweep(spec, str(out), workers=2, progress=False).ran == 0
    next(iter(manifest["runs"].values()))[1]["hp3o_schedule"] = "episode"  # a real difference still counts
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="hp3o_schedule 'episode' -> 'rollout'"):
        run_sweep(spec, str(out), workers=2, progress=False)


def test_a_spec_that_only_adds_runs_extends_the_sweep(finished, tmp_path):
    """More seeds and a new variant: only the new runs run, the finished ones are kept as they are."""
    out = tmp_path / "copy"
    shutil.copytree(finished[1], out)
    results = (out / "results.csv").read_text()
    events = sorted((out / "runs").glob("*/events.out.tfevents.*"))
    stamps = [p.stat().st_mtime_ns for p in events]
    bigger = SPEC.replace("seeds = 2", "seeds = [1, 2, 3]").replace("[variants]", "[variants]\nhp3o = { presets = [\"hp3o\"], hp3o_samples = 260 }")
    extended = write_spec(tmp_path, bigger)
    outcome = run_sweep(extended, str(out), workers=2, progress=False)
    assert outcome.ran == 4 + 3  # seed 3 of the four old variants, three seeds of the new one
    assert [p.stat().st_mtime_ns for p in events] == stamps  # finished runs untouched
    rows = list(csv.DictReader(open(out / "runs.csv")))
    assert len(rows) == 15 and {r["status"] for r in rows} == {"done"}
    old_rows = [line for line in results.splitlines()[1:]]
    assert set(old_rows) <= set((out / "results.csv").read_text().splitlines())
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["spec"]["seeds"] == [1, 2, 3] and manifest["extended_from"][0]["spec"]["seeds"] == 2


def differing(manifest):
    """The config fields whose values differ between the manifest's rlkit runs (env, seed aside)."""
    configs = [config for kind, config in manifest["runs"].values() if kind == "rlkit"]
    return {k for k in configs[0] if k not in ("env", "seed") and len({json.dumps(c[k]) for c in configs}) > 1}


def test_a_sweeps_runs_show_what_differs_within_it_and_no_experiment_summary(finished, tmp_path):
    """Each run's hparams (its session-start info, read back): variant, env, seed and the fields
    that differ between the sweep's rlkit runs, nothing else; the full config stays in config.json.
    Packed runs (the fixture's), a run alone (seeds = 1) and the SB3 baselines alike."""
    from tests.gym.test_hparams import shown

    _, out, _ = finished
    manifest = json.loads((out / "manifest.json").read_text())
    fields = differing(manifest)
    assert {"outer", "outer_nesterov"} <= fields and "adam_eps" not in fields and len(fields) < 12
    for name, (kind, config) in manifest["runs"].items():
        values = shown(out / "runs" / name)
        assert set(values) == {"variant", "env", "seed"} | fields, name
        assert values["seed"] == config["seed"] and values["env"] == "CartPole-v1"
        if kind != "rlkit":
            assert values["variant"] == kind
    assert '"adam_eps"' in (out / "runs" / "ppo__CartPole-v1__s1" / "config.json").read_text()
    alone = tmp_path / "alone"
    run_sweep(write_spec(tmp_path, SPEC.replace("seeds = 2", "seeds = [3]").replace(
        '"sb3:ppo" = {}\n"sb3-contrib:trpo" = {}\n', "")), str(alone), workers=2, progress=False)
    for name in ("ppo__CartPole-v1__s3", "outer__CartPole-v1__s3"):
        assert set(shown(alone / "runs" / name)) == {"variant", "env", "seed"} | fields


def test_report_writes_statistics_and_figures(finished):
    _, out, _ = finished
    paths = write_report(str(out), reps=300)
    summary = json.loads((out / "report" / "summary.json").read_text())
    assert set(summary["aggregate"]) == {"ppo", "outer", "sb3:ppo", "sb3-contrib:trpo"}
    assert set(summary["improvement"]) == {"outer", "sb3:ppo", "sb3-contrib:trpo"}
    assert summary["references"]["CartPole-v1"]["source"] == "spec"
    for png in paths["figures"]:
        assert (out / "report" / png).stat().st_size > 10_000
    text = (out / "report" / "report.md").read_text()
    assert "| CartPole-v1 | ppo | 2 |" in text and "P(> baseline)" in text


def test_failed_runs_are_recorded_and_retried_on_request(tmp_path, capsys):
    spec = write_spec(tmp_path, SPEC.replace('envs = ["CartPole-v1"]', 'envs = ["CartPole-v1", "rlkit-test/Raising-v0"]')
                      .replace('"sb3:ppo" = {}\n"sb3-contrib:trpo" = {}\n', ""))
    out = tmp_path / "out"
    assert main(["sweep", spec, "--out", str(out), "--workers", "2"]) == 1
    assert "4 run(s) failed" in capsys.readouterr().err
    failed = [r for r in rows(out / "runs.csv") if r["status"] == "failed"]
    assert len(failed) == 4 and all("simulated physics blow-up" in r["error"] for r in failed)
    assert run_sweep(spec, str(out), workers=2, progress=False).ran == 0
    assert run_sweep(spec, str(out), workers=2, progress=False, retry_failed=True).ran == 4
    report = write_report(str(out), reps=200)
    assert "rlkit-test/Raising-v0 / seed 1: failed" in Path(report["report"]).read_text()


# A sweep whose runs each stop for good once they have logged their second update (after their
# first checkpoint), each worker first leaving a file named by its pid in the folder given first.
# Its workers are forked (as on a CPU build of torch) so that they inherit the stop.
PAUSES_EACH_RUN = """
import multiprocessing, os, sys, time
from pathlib import Path
from rlkit.ablation import runner
from rlkit.cli import main
from rlkit.io.logger import Logger
paused = Path(sys.argv.pop(1))
runner.pool_context = lambda: multiprocessing.get_context("fork")
logged = Logger.scalars
def scalars(self, values, step):
    logged(self, values, step)
    if step == 512:
        (paused / str(os.getpid())).touch()
        time.sleep(3600)
Logger.scalars = scalars
sys.exit(main(sys.argv[1:]))
"""


def sigkill_mid_sweep(spec, out, *flags):
    """Start ``rlkit sweep spec --out out --workers 2 flags`` (a spec of 256 steps an update and a
    checkpoint every update, as :data:`SPEC`), SIGKILL it once both workers are inside a run past
    its first checkpoint (each stopped there, see :data:`PAUSES_EACH_RUN`), and wait until its
    workers have died with it."""
    paused = out.parent / "paused"
    paused.mkdir()
    cmd = [sys.executable, "-c", PAUSES_EACH_RUN, str(paused), "sweep", spec, "--out", str(out), "--workers", "2",
           *flags]
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: len(list(paused.iterdir())) == 2 or proc.poll() is not None), "no worker paused"
        workers = children(proc.pid)
        assert proc.poll() is None and {int(p.name) for p in paused.iterdir()} <= set(workers)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not list(out.glob("runs/*/result.json"))
    assert wait_gone(workers) == []  # the workers die with the sweep (die_with_owner)


def test_a_sweep_killed_with_sigkill_resumes_to_the_same_results(finished, tmp_path):
    spec, reference, _ = finished
    spec = write_spec(tmp_path, SPEC.replace('"sb3:ppo" = {}\n"sb3-contrib:trpo" = {}\n', "")
                      .replace("total_steps = 1024", "total_steps = 8192"))
    out = tmp_path / "out"
    sigkill_mid_sweep(spec, out)
    resumed = run_sweep(spec, str(out), workers=2, progress=False)
    assert resumed.done == 4 and resumed.ran >= 1
    straight = run_sweep(spec, str(tmp_path / "straight"), workers=2, progress=False)
    key = lambda r: (r["variant"], r["seed"], r["step"])  # noqa: E731
    a = {key(r): r["eval_return_mean"] for r in rows(out / "results.csv")}
    b = {key(r): r["eval_return_mean"] for r in rows(tmp_path / "straight" / "results.csv")}
    assert straight.done == 4 and a == b and len(a) == 4 * 16


def test_dry_run_lists_runs_and_states(finished, capsys):
    spec, out, _ = finished
    assert main(["sweep", spec, "--out", str(out), "--dry-run"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 8 and all(line.startswith("done") for line in lines)


def test_report_on_an_unfinished_sweep_lists_what_is_missing(finished, tmp_path):
    import shutil

    _, out, _ = finished
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "runs" / "ppo__CartPole-v1__s2" / "result.json").unlink()
    text = Path(write_report(str(copy), reps=200)["report"]).read_text()
    assert "- ppo / CartPole-v1 / seed 2: missing" in text and "7 done, 1 missing" in text


def test_ray_missing_is_one_line(finished, tmp_path, monkeypatch, capsys):
    spec, _, _ = finished
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    assert main(["sweep", spec, "--out", str(tmp_path / "r"), "--backend", "ray"]) == 2
    assert "pip install 'rlkit[ray]'" in capsys.readouterr().err


@pytest.mark.parametrize("space,policy", [
    (gym.spaces.Box(0, 255, (84, 84, 4), np.uint8), "CnnPolicy"),
    (gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), "CnnPolicy"),
    (gym.spaces.Box(0, 1, (10, 10, 4), np.bool_), "MlpPolicy"),  # MinAtar planes: too small for NatureCNN
    (gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.Box(-1, 1, (2,))}), "MultiInputPolicy"),
    (gym.spaces.Box(-1, 1, (3,)), "MlpPolicy"),
])
def test_sb3_baselines_pick_the_policy_their_observations_need(space, policy):
    pytest.importorskip("stable_baselines3")
    from rlkit.ablation.baselines import _policy

    assert _policy(space) == policy


def test_a_restarted_baseline_hides_its_earlier_attempt_in_tensorboard(tmp_path):
    pytest.importorskip("stable_baselines3")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlkit.ablation.baselines import train_baseline
    from rlkit.ablation.spec import expand
    from rlkit.io.logger import Logger

    import tomllib
    (run,) = [r for r in expand(tomllib.loads(SPEC)).runs if r.kind == "sb3:ppo" and r.seed == 1]
    run_dir = tmp_path / run.name
    earlier = Logger(str(run_dir))  # an attempt stopped after its first evaluation (and one odd step)
    earlier.scalars({"eval/return_mean": -1.0}, 512)
    earlier.scalars({"eval/return_mean": -1.0}, 777)
    earlier.close()
    train_baseline(run.kind, {**run.config, "logdir": str(tmp_path), "run_name": run.name, "resume": None,
                              "progress": False, "torch_threads": 1}, run_dir)
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    points = [(e.step, e.value) for e in acc.Scalars("eval/return_mean")]
    assert [step for step, _ in points] == [512, 1024] and -1.0 not in [v for _, v in points]
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2  # the earlier attempt's file is kept


@pytest.mark.parametrize("kind,tag", [("sb3:ppo", "sb3/train/approx_kl"),
                                      ("sb3-contrib:trpo", "sb3/train/kl_divergence_loss")])
def test_a_baseline_logs_its_training_statistics_in_its_run_and_nothing_in_the_temp_dir(
        kind, tag, tmp_path, monkeypatch):
    pytest.importorskip("sb3_contrib")
    import tempfile
    import tomllib

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlkit.ablation.baselines import train_baseline
    from rlkit.ablation.spec import expand

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where SB3's default logger makes its folder
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    (run,) = [r for r in expand(tomllib.loads(SPEC)).runs if r.kind == kind and r.seed == 1]
    run_dir = tmp_path / run.name
    train_baseline(run.kind, {**run.config, "logdir": str(tmp_path), "run_name": run.name, "resume": None,
                              "progress": False, "torch_threads": 1}, run_dir)
    # torch's own per-user cache folder (made when the optimizer imports torch._dynamo) may appear
    assert [p.name for p in temp.iterdir() if not p.name.startswith("torchinductor_")] == []
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {tag, "sb3/train/explained_variance", "sb3/time/fps", "eval/return_mean"} <= set(tags)
    steps = [e.step for e in acc.Scalars("sb3/time/fps")]
    assert steps == sorted(steps) and steps[-1] == 1024 and all(s % 256 == 0 for s in steps)
    assert all(np.isfinite(e.value) for e in acc.Scalars(tag))
