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
from rlkit.gym.population.rollout import TOGETHER
from tests.robustness.helpers import run_cli
from tests.test_reproducibility import _stop_after_update, assert_same_bits, assert_trained_from, final_tensors


def _cfg(tmp_path, name, **kw):
    """A small CartPole population on the CPU, where a member's bits do not depend on the others
    (on CUDA the batched GEMMs' kernels depend on the batch count: tests/gym/population/test_cuda.py)."""
    base = dict(total_steps=2048, num_envs=2, num_steps=128, eval_episodes=2, checkpoint_every=512,
                progress=False, logdir=str(tmp_path), run_name=name, device="cpu")
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
    ("CartPole-v1", {"env_backend": "vector"}),  # all members' envs one vectorized CartPole
    ("CartPole-v1", {"hp3o": True, "hp3o_samples": 256}),  # each member's own hybrid batches and update
    ("Pendulum-v1", {"norm_obs": True, "hp3o": True, "hp3o_samples": 256, "hp3o_plus": True,
                     "hp3o_schedule": "episode", "hp3o_redraw_each_epoch": True, "outer": True, "outer_lr": 1.0,
                     "outer_momentum": 0.5}),
    # a plug-in objective on the stacked autograd path, each member its own adaptive KL coefficient
    # (a target at which seeds 2 and 5 adapt theirs differently)
    ("Pendulum-v1", {"norm_obs": True, "kl_adaptive": True, "kl_dtarg": 7e-5, "total_steps": 1024}),
])
def test_a_member_gives_the_same_bits_alone_and_among_others(tmp_path, env, extra):
    alone = train_population(_cfg(tmp_path, "alone", env=env, **extra), [2])
    assert TOGETHER <= 4  # the four below normalize and sample in one pass, the one alone member by member
    among = train_population(_cfg(tmp_path, "among", env=env, **extra), [5, 2, 9, 11])
    assert [o.error for o in alone + among] == [None] * 5
    a, b = alone[0].result, among[1].result
    assert_same_bits(final_tensors(a.run_dir), final_tensors(b.run_dir))
    assert_trained_from(final_tensors(a.run_dir), _first_checkpoint(a.run_dir))
    assert a.eval_history == b.eval_history and a.seed == b.seed == 2
    # The other members are other runs.
    assert not torch.equal(final_tensors(among[0].run_dir)["model.actor.0.weight"],
                           final_tensors(b.run_dir)["model.actor.0.weight"])


@pytest.mark.parametrize("env, extra", [("rlkit-test/RaisesForSeed100-v0", {}), ("rlkit-test/NaNObsForSeed100-v0", {}),
                                        ("rlkit-test/NaNRewardForSeed100-v0", {}),
                                        ("rlkit-test/NaNRewardForSeed100-v0", {"hp3o": True, "hp3o_samples": 256})])
def test_a_failing_member_is_recorded_and_the_others_finish(tmp_path, env, extra):
    alone = train_population(_cfg(tmp_path, "alone", env=env, total_steps=1024, **extra), [1])
    bad, ok = train_population(_cfg(tmp_path, "pop", env=env, total_steps=1024, **extra), [100, 1])  # the first fails
    assert ok.error is None and ok.result.updates == 4 and (tmp_path / "pop__s1" / "result.json").is_file()
    assert bad.result is None and bad.error and "\n" not in bad.error
    assert not (tmp_path / "pop__s100" / "result.json").exists()
    assert_same_bits(final_tensors(alone[0].run_dir), final_tensors(ok.run_dir))
    (only,) = train_population(_cfg(tmp_path, "all", env=env, total_steps=1024, **extra), [100])  # nobody left
    assert only.error == bad.error and only.result is None  # its single run's code, the same one line


@pytest.mark.parametrize("backend, extra", [("gymnasium", {}), ("vector", {}),
                                            ("gymnasium", {"hp3o": True, "hp3o_samples": 256,
                                                           "hp3o_schedule": "episode"})])
def test_a_killed_population_resumes_every_member_bit_identically(tmp_path, monkeypatch, backend, extra):
    whole = train_population(_cfg(tmp_path, "whole", env_backend=backend, **extra), [1, 2])
    for name in ("cut", "alone"):
        with monkeypatch.context() as m:
            _stop_after_update(m, 3)
            with pytest.raises(PopulationInterrupted):
                train_population(_cfg(tmp_path, name, env_backend=backend, **extra), [1, 2])
    together = resume_population([tmp_path / "cut__s1", tmp_path / "cut__s2"])
    one_by_one = [resume_population([tmp_path / f"alone__s{s}"])[0] for s in (1, 2)]  # a population of one each
    for w, r, a in zip(whole, together, one_by_one):
        assert_same_bits(final_tensors(w.run_dir), final_tensors(r.run_dir))
        assert_same_bits(final_tensors(w.run_dir), final_tensors(a.run_dir))
        assert w.result.eval_history == r.result.eval_history == a.result.eval_history
    with pytest.raises(ConfigError, match="resume_population"):  # the single-run path would change its numbers
        rlkit.gym.trainer.resume(str(tmp_path / "whole__s1"))


def test_a_stop_with_a_failed_member_resumes_the_others(tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        _stop_after_update(m, 3)
        with pytest.raises(PopulationInterrupted) as stop:
            train_population(_cfg(tmp_path, "p", env="rlkit-test/RaisesForSeed100-v0"), [1, 100])
    assert [p.name for p in stop.value.run_dirs] == ["p__s1"] and list(stop.value.failed) == [str(tmp_path / "p__s100")]
    (done,) = resume_population(stop.value.run_dirs)
    assert done.error is None and done.result.updates == 8


@pytest.mark.parametrize("seeds, match", [(np.array([3, 4]), None), ((s for s in (3, 4)), None),
                                          (3, "list of integer seeds"), ([3, 2**32], "seed must be"),
                                          ([3, True], "integers"), (range(5000), "1 to 4096")])
def test_seeds_any_iterable_of_integers_anything_else_refused_before_a_folder_is_made(tmp_path, seeds, match):
    cfg = _cfg(tmp_path, "s", total_steps=256, eval_episodes=0)
    if match is None:
        assert [o.seed for o in train_population(cfg, seeds)] == [3, 4]
        return
    with pytest.raises(ConfigError, match=match):
        train_population(cfg, seeds)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("cfg, names, match", [(None, None, "must be a TrainConfig"),
                                               ({"env": "CartPole-v1"}, None, "must be a TrainConfig"),
                                               ("ok", "ab", "list of names"), ("ok", ["a", 7], "list of names")])
def test_a_config_or_run_names_of_the_wrong_type_are_refused_in_one_line(tmp_path, cfg, names, match):
    cfg = _cfg(tmp_path, "r", total_steps=256) if cfg == "ok" else cfg
    with pytest.raises(ConfigError, match=match) as err:
        train_population(cfg, [1, 2], names)
    assert "\n" not in str(err.value) and not list(tmp_path.iterdir())


def test_a_taken_member_name_is_refused_before_any_member_is_made(tmp_path):
    (tmp_path / "r__s3").mkdir()
    (tmp_path / "r__s3" / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="already exists"):
        train_population(_cfg(tmp_path, "r"), [1, 3])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r__s3"] and (tmp_path / "r__s3" / "keep.txt").read_text() == "mine"
    with pytest.raises(ConfigError, match="given twice"):
        resume_population([tmp_path / "r__s3", str(tmp_path / "r__s3") + "/"])
    with pytest.raises(ConfigError, match="list of run directories"):
        resume_population(str(tmp_path / "r__s3"))


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
    more = run_cli("train", "--resume", str(tmp_path / "p__s8"), "--total-steps", "2048")  # alone: a population of one
    assert more.returncode == 0, more.stderr[-2000:]
    extended = [json.loads(x) for x in more.stdout.splitlines() if x.startswith("{")]
    assert [x["updates"] for x in extended] == [8]
    assert [e[0] for e in extended[0]["eval_history"]] == [1024, 2048]  # the member's final evaluation is kept


@pytest.mark.parametrize("seeds, kw, match", [
    ([1, 1], {}, "given twice"),
    ([], {}, "1 to 4096"),
    ([1, 2], {"env": "rlkit-test/ImageObs-v0"}, "images"),
    ([1, 2], {"env": "rlkit-test/MaskedFatal-v0"}, "masks"),
])
def test_what_a_population_cannot_train_is_refused_in_one_line(tmp_path, seeds, kw, match):
    with pytest.raises(ConfigError, match=match) as err:
        train_population(_cfg(tmp_path, "r", **kw), seeds)
    assert "\n" not in str(err.value) and not list(tmp_path.iterdir())


def test_the_cli_refuses_contradicting_population_flags(tmp_path):
    for argv, match in [(["--seeds", "1", "2", "--population", "2"], "not both"),
                        (["--population", "0"], ">= 1"), (["--seeds", "1", "2", "--seed", "3"], "drop --seed"),
                        (["--seeds", "1", "--seed=3"], "drop --seed"), (["--seeds", "x"], "(see rlkit train --help)")]:
        out = run_cli("train", *argv, "--logdir", str(tmp_path))
        assert out.returncode == 2 and match in out.stderr and out.stderr.count("\n") == 1, out.stderr


@pytest.mark.parametrize("env, extra", [("CartPole-v1", {}), ("Pendulum-v1", {"norm_obs": True})])
def test_members_evaluate_together_as_each_single_run_evaluates(tmp_path, env, extra):
    """The members' evaluations run in lockstep through one batched forward; each is what the
    single-run protocol (run_episodes with the member's own agent, env and seeds) gives."""
    from rlkit.core.loop import EVAL_SEED_OFFSET

    out = train_population(_cfg(tmp_path, "p", env=env, eval_every=1024, eval_episodes=3, **extra), [3, 4, 5])
    for o in out:
        assert o.error is None and [s for s, _, _ in o.result.eval_history] == [1024, 2048]
        agent, cfg = rlkit.Agent.load(o.run_dir)  # the final weights and normalization statistics
        alone = agent.evaluate(cfg.env, 3, seed=o.seed + EVAL_SEED_OFFSET)
        assert o.result.eval_history[-1][1:] == (alone.mean, alone.std)


def test_a_member_whose_evaluation_fails_is_failed_and_the_others_evaluate(tmp_path):
    # The env raises once reset with seed 10003: member 3's first evaluation episode, no training env.
    bad, ok = train_population(_cfg(tmp_path, "p", env="rlkit-test/RaisesForSeed100-v0", total_steps=512,
                                    env_kwargs='{"seed": 10003, "after": 3}'), [3, 4])
    assert bad.result is None and bad.error.startswith("evaluation on rlkit-test/RaisesForSeed100-v0 failed")
    assert ok.error is None and len(ok.result.eval_history) == 1


def test_a_member_that_lost_its_population_json_resumes_as_a_member_to_the_same_bits(tmp_path, monkeypatch, capsys):
    """Its checkpoints say it is a member: ``rlkit train --resume`` continues it as a population of
    one (the single-run code would end off in the last bits); the single-run API refuses it."""
    from rlkit.cli import main

    whole = train_population(_cfg(tmp_path, "whole", total_steps=1024), [1, 2])
    with monkeypatch.context() as m:
        _stop_after_update(m, 3)
        with pytest.raises(PopulationInterrupted):
            train_population(_cfg(tmp_path, "cut", total_steps=1024), [1, 2])
    for s in (1, 2):
        (tmp_path / f"cut__s{s}" / "population.json").unlink()
    assert main(["train", "--resume", str(tmp_path / "cut__s1"), "--no-progress"]) == 0
    assert_same_bits(final_tensors(whole[0].run_dir), final_tensors(tmp_path / "cut__s1"))
    with pytest.raises(ConfigError, match="resume_population"):
        rlkit.gym.trainer.resume(str(tmp_path / "cut__s2"))


def test_a_population_of_one_equals_its_single_run_to_rounding(tmp_path):
    """docs/populations.md: a member's envs, seeds and streams are its single run's; its stacked
    update rounds differently from the single run's kernels, so the weights agree to rounding."""
    single = rlkit.train(_cfg(tmp_path, "single", seed=5, eval_every=1024, eval_episodes=2))
    (member,) = train_population(_cfg(tmp_path, "pop", eval_every=1024, eval_episodes=2), [5])
    a, b = final_tensors(single.run_dir), final_tensors(member.result.run_dir)
    assert_trained_from(a, _first_checkpoint(single.run_dir))
    assert set(a) == set(b) and single.updates == member.result.updates == 8
    for k in (k for k in a if k.startswith(("model.", "optim."))):
        assert torch.allclose(a[k].double(), b[k].double(), rtol=1e-4, atol=1e-6), k
    assert [s for s, _, _ in single.eval_history] == [s for s, _, _ in member.result.eval_history] == [1024, 2048]
