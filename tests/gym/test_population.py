"""Many seeds in one process: a member's numbers do not depend on who else is in the population, a
failing member does not stop the others, a killed population resumes bit-identically, and each
member's run directory is a single run's."""

import json

import numpy as np
import pytest
import torch

import rlkit
from rlkit.errors import ConfigError
from rlkit.gym.population import PopulationInterrupted, resume_population, train_population
from tests.robustness.helpers import run_cli
from tests.test_reproducibility import _stop_after_update, assert_same_bits, assert_trained_from, final_tensors


def _cfg(tmp_path, name, **kw):
    base = dict(total_steps=2048, num_envs=2, num_steps=128, eval_episodes=2, checkpoint_every=512,
                progress=False, logdir=str(tmp_path), run_name=name)
    return rlkit.preset("cartpole", **{**base, **kw})


def _first_checkpoint(run_dir):
    from pathlib import Path
    from safetensors.torch import load_file

    first = sorted(p for p in (Path(run_dir) / "checkpoints").iterdir() if p.is_dir())[0]
    return load_file(str(first / "tensors.safetensors"))


@pytest.mark.parametrize("env, extra", [
    ("CartPole-v1", {}),
    ("Pendulum-v1", {"norm_obs": True, "norm_reward": True, "target_kl": 0.01}),
    ("CartPole-v1", {"outer": True, "outer_lr": 1.0, "outer_momentum": 0.5, "outer_nesterov": True}),
])
def test_a_member_gives_the_same_bits_alone_and_among_others(tmp_path, env, extra):
    alone = train_population(_cfg(tmp_path, "alone", env=env, **extra), [2])
    among = train_population(_cfg(tmp_path, "among", env=env, **extra), [5, 2, 9])
    assert [o.error for o in alone + among] == [None] * 4
    a, b = alone[0].result, among[1].result
    assert_same_bits(final_tensors(a.run_dir), final_tensors(b.run_dir))
    assert_trained_from(final_tensors(a.run_dir), _first_checkpoint(a.run_dir))
    assert a.eval_history == b.eval_history and a.seed == b.seed == 2
    # The other members are other runs.
    assert not torch.equal(final_tensors(among[0].run_dir)["model.actor.0.weight"],
                           final_tensors(b.run_dir)["model.actor.0.weight"])


@pytest.mark.parametrize("env", ["rlkit-test/RaisesForSeed100-v0", "rlkit-test/NaNObsForSeed100-v0"])
def test_a_failing_member_is_recorded_and_the_others_finish(tmp_path, env):
    alone = train_population(_cfg(tmp_path, "alone", env=env, total_steps=1024), [1])
    outcomes = train_population(_cfg(tmp_path, "pop", env=env, total_steps=1024), [1, 100])
    ok, bad = outcomes
    assert ok.error is None and ok.result.updates == 4 and (tmp_path / "pop__s1" / "result.json").is_file()
    assert bad.result is None and bad.error and "\n" not in bad.error
    assert not (tmp_path / "pop__s100" / "result.json").exists()
    assert_same_bits(final_tensors(alone[0].run_dir), final_tensors(ok.run_dir))


def test_a_killed_population_resumes_every_member_bit_identically(tmp_path, monkeypatch):
    whole = train_population(_cfg(tmp_path, "whole"), [1, 2])
    with monkeypatch.context() as m:
        _stop_after_update(m, 3)
        with pytest.raises(PopulationInterrupted):
            train_population(_cfg(tmp_path, "cut"), [1, 2])
    resumed = resume_population([tmp_path / "cut__s1", tmp_path / "cut__s2"])
    for w, r in zip(whole, resumed):
        assert_same_bits(final_tensors(w.run_dir), final_tensors(r.run_dir))
        assert w.result.eval_history == r.result.eval_history


def test_each_member_is_a_single_run_for_eval_and_the_cli(tmp_path):
    out = run_cli("train", "--preset", "cartpole", "--population", "2", "--seed", "7", "--total-steps", "1024",
                  "--num-envs", "2", "--eval-episodes", "2", "--logdir", str(tmp_path), "--run-name", "p",
                   "--no-progress")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert [x["seed"] for x in lines] == [7, 8] and all(x["updates"] == 4 for x in lines)
    config = json.loads((tmp_path / "p__s8" / "config.json").read_text())
    assert config["seed"] == 8 and any((tmp_path / "p__s8").glob("events.out.tfevents.*"))
    agent, loaded = rlkit.Agent.load(str(tmp_path / "p__s7"))
    assert loaded.seed == 7 and agent.act(np.zeros(4, np.float32)).shape == ()
    ev = run_cli("eval", str(tmp_path / "p__s7"), "--episodes", "2")
    assert ev.returncode == 0, ev.stderr[-2000:]


@pytest.mark.parametrize("seeds, kw, match", [
    ([1, 1], {}, "given twice"),
    ([], {}, "one or more"),
    ([1, 2], {"hp3o": True}, "its own batches"),
    ([1, 2], {"env": "rlkit-test/ImageObs-v0"}, "images"),
    ([1, 2], {"env": "rlkit-test/MaskedFatal-v0"}, "masks"),
])
def test_what_a_population_cannot_train_is_refused_in_one_line(tmp_path, seeds, kw, match):
    with pytest.raises(ConfigError, match=match) as err:
        train_population(_cfg(tmp_path, "r", **kw), seeds)
    assert "\n" not in str(err.value) and not list(tmp_path.iterdir())


def test_the_cli_refuses_contradicting_population_flags(tmp_path):
    for argv, match in [(["--seeds", "1", "2", "--population", "2"], "not both"),
                        (["--population", "0"], ">= 1")]:
        out = run_cli("train", *argv, "--logdir", str(tmp_path))
        assert out.returncode == 2 and match in out.stderr and out.stderr.count("\n") == 1, out.stderr
