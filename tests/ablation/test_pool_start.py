"""A sweep on a machine with CUDA in reach spawns its workers (a forked child of a process that
has asked the CUDA driver anything cannot use CUDA): the runs finish there as with forked workers."""

import csv

import pytest
import torch

from rlkit.ablation import runner
from rlkit.ablation.sweep import run_sweep
from tests.ablation.test_sweep import SPEC, write_spec


def test_workers_fork_only_where_cuda_is_out_of_reach(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert runner.pool_context().get_start_method() == "spawn"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runner.pool_context().get_start_method() == "spawn"  # a CUDA build beside a GPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runner.pool_context().get_start_method() != "spawn"


@pytest.mark.skipif(torch.cuda.is_available(), reason="forked workers of a process that asked the CUDA driver fail")
def test_a_sweep_in_spawned_workers_gets_the_forked_workers_results(tmp_path, monkeypatch):
    text = SPEC.replace('"sb3:ppo" = {}\n"sb3-contrib:trpo" = {}\n', "").replace("seeds = 2", "seeds = 1")
    spec = write_spec(tmp_path, text)
    assert runner.pool_context().get_start_method() != "spawn"
    forked = run_sweep(spec, str(tmp_path / "forked"), workers=2, progress=False)
    monkeypatch.setattr(runner, "cuda_in_reach", lambda: True)
    assert runner.pool_context().get_start_method() == "spawn"
    spawned = run_sweep(spec, str(tmp_path / "spawned"), workers=2, progress=False)
    assert forked.done == spawned.done == 2

    def returns(path):
        with open(path / "results.csv") as f:
            return {(r["variant"], r["step"]): r["eval_return_mean"] for r in csv.DictReader(f)}

    assert returns(tmp_path / "forked") == returns(tmp_path / "spawned")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_sweep_after_cuda_is_really_initialized_finishes_in_spawned_workers(tmp_path):
    text = SPEC.replace('"sb3:ppo" = {}\n"sb3-contrib:trpo" = {}\n', "").replace("seeds = 2", "seeds = 1")
    spec = write_spec(tmp_path, text)
    assert runner.pool_context().get_start_method() == "spawn"  # the GPU is in reach
    torch.zeros(1, device="cuda")  # and now the parent holds a CUDA context
    assert run_sweep(spec, str(tmp_path / "sweep"), workers=2, progress=False).done == 2


def test_an_env_registered_only_in_the_sweeps_process_reaches_spawned_workers(tmp_path, monkeypatch):
    import gymnasium as gym

    env_id = "rlkit-test/RegisteredHereOnly-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point="tests.toy_envs:IdentityDiscrete", max_episode_steps=20)
    text = (SPEC.replace('"sb3:ppo" = {}\n"sb3-contrib:trpo" = {}\n', "").replace("seeds = 2", "seeds = 1")
            .replace("CartPole-v1", env_id))
    monkeypatch.setattr(runner, "cuda_in_reach", lambda: True)
    summary = run_sweep(write_spec(tmp_path, text), str(tmp_path / "out"), workers=2, progress=False)
    assert (summary.done, summary.failed) == (2, 0)


class _HereOnly:
    """An env class the sweep's process finds in its ``__main__`` and a spawned worker does not."""


def test_an_env_registration_a_worker_cannot_load_fails_only_its_runs_in_one_line(tmp_path, monkeypatch):
    import sys

    import gymnasium as gym

    from tests.toy_envs import IdentityDiscrete

    monkeypatch.setattr(sys.modules["__main__"], "_HereOnly", _HereOnly, raising=False)
    monkeypatch.setattr(_HereOnly, "__module__", "__main__")
    ids = {"ok": "rlkit-test/SentOk-v0", "lambda": "rlkit-test/SentLambda-v0", "main": "rlkit-test/SentMain-v0"}
    for key, entry in [("ok", "tests.toy_envs:IdentityDiscrete"), ("lambda", lambda: IdentityDiscrete()),
                       ("main", _HereOnly)]:
        gym.register(ids[key], entry_point=entry, max_episode_steps=20)
        monkeypatch.setitem(gym.registry, ids[key], gym.registry[ids[key]])  # unregistered afterwards
    text = (SPEC.replace('"sb3:ppo" = {}\n"sb3-contrib:trpo" = {}\n', "").replace("seeds = 2", "seeds = 1")
            .replace('envs = ["CartPole-v1"]', f"envs = {list(ids.values())!r}".replace("'", '"'))
            .replace('[reference."CartPole-v1"]\nrandom = 22.0\nreference = 500.0\n', ""))
    monkeypatch.setattr(runner, "cuda_in_reach", lambda: True)
    summary = run_sweep(write_spec(tmp_path, text), str(tmp_path / "out"), workers=2, progress=False)
    with open(tmp_path / "out" / "runs.csv") as f:
        status = {(r["env"], r["variant"]): (r["status"], r["error"]) for r in csv.DictReader(f)}
    assert (summary.done, summary.failed) == (2, 4)
    assert {status[(ids["ok"], v)][0] for v in ("ppo", "outer")} == {"done"}
    for key in ("lambda", "main"):
        for v in ("ppo", "outer"):
            state, error = status[(ids[key], v)]
            assert state == "failed" and "in a form a worker process cannot load" in error and "\n" not in error
