"""A population with ``async_envs``: the last half of the members' envs step in one worker process
beside the trainer. A member's numbers are those of the in-process population; an env error in the worker
fails that member alone; a worker that dies fails its members, and the others finish."""

import json
import os
import signal

import pytest

from rlkit.gym.population import host as population_host
from rlkit.gym.population import start as population_start
from rlkit.gym.population import train_population
from tests.gym.population.test_population import _cfg
from tests.test_reproducibility import assert_same_bits, final_tensors


def test_members_hosted_in_a_worker_give_the_bits_of_the_in_process_population(tmp_path):
    kw = dict(env="Pendulum-v1", norm_obs=True, norm_reward=True, total_steps=1024)
    plain = train_population(_cfg(tmp_path, "plain", **kw), [1, 2, 3])
    hosted = train_population(_cfg(tmp_path, "hosted", async_envs=True, **kw), [1, 2, 3])
    alone = train_population(_cfg(tmp_path, "alone", async_envs=True, **kw), [3])  # its own async workers
    assert [o.error for o in plain + hosted + alone] == [None] * 7
    for a, b in zip(plain, hosted):
        assert_same_bits(final_tensors(a.run_dir), final_tensors(b.run_dir))
        assert a.result.eval_history == b.result.eval_history
    assert_same_bits(final_tensors(plain[2].run_dir), final_tensors(alone[0].run_dir))


@pytest.mark.parametrize("env", ["rlkit-test/RaisesForSeed100-v0", "rlkit-test/NaNObsForSeed100-v0", "rlkit-test/NaNRewardForSeed100-v0",
                                 "rlkit-test/InterruptsForSeed100-v0"])
def test_a_member_failing_in_the_worker_is_failed_alone(tmp_path, env, capfd):
    out = train_population(_cfg(tmp_path, "p", env=env, total_steps=1024, async_envs=True), [1, 2, 100])
    assert [o.error is None for o in out] == [True, True, False]  # seed 100 is the worker's (the last K - K // 2)
    assert "\n" not in out[2].error and out[0].result.updates == out[1].result.updates == 4
    assert "Traceback" not in capfd.readouterr().err  # the worker reports it, it prints nothing


@pytest.mark.parametrize("bad", [1, 3])  # in the trainer's group; in the worker's
def test_a_gaussian_member_failing_mid_step_leaves_the_others_bits(tmp_path, bad):
    """Members sample, normalize and scale rewards group by group, in one pass for a group; one
    failing (NaN observations) leaves the others of its group and of the other group their bits."""
    kw = dict(env="rlkit-test/BoxNaNForSeed100-v0", norm_obs=True, norm_reward=True, total_steps=1024)
    seeds = [1, 2, 3, 4]
    plain = train_population(_cfg(tmp_path, "plain", **kw), seeds)
    hosted = train_population(_cfg(tmp_path, "hosted", async_envs=True, **kw), seeds[:bad] + [100] + seeds[bad:])
    assert [o.error for o in plain] == [None] * 4
    assert [o.error is None for o in hosted] == [k != bad for k in range(5)] and "\n" not in hosted[bad].error
    for a, b in zip(plain, hosted[:bad] + hosted[bad + 1:]):
        assert_same_bits(final_tensors(a.run_dir), final_tensors(b.run_dir))


def test_a_worker_that_dies_fails_its_members_and_the_others_finish(tmp_path, monkeypatch):
    hosts = []
    real_start = population_host.HostedEnvs.start

    def start(self, actions, live):
        hosts.append(self)
        if len(hosts) == 50:  # mid-training: the worker is killed
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.join(10)
        return real_start(self, actions, live)

    monkeypatch.setattr(population_host.HostedEnvs, "start", start)
    first, second, third, fourth = train_population(_cfg(tmp_path, "p", total_steps=1024, async_envs=True), [1, 2, 3, 4])
    assert first.error is None and second.error is None and first.result.updates == 4
    for gone in (third, fourth):
        assert gone.result is None and "worker process died" in gone.error and "\n" not in gone.error


@pytest.mark.parametrize("at", [128, 64])  # the last step of the run; the last of its first rollout
def test_a_worker_dying_in_a_rollouts_last_step_fails_its_members_in_that_update(tmp_path, at):
    """The step the worker died in gives its members no results (not the step before's), so they
    fail there: no checkpoint or result of theirs holds a step they never took."""
    cfg = _cfg(tmp_path, f"p{at}", env="rlkit-test/DiesInWorker-v0", env_kwargs=json.dumps({"at": at}),
               total_steps=256, num_steps=64, checkpoint_every=128, async_envs=True)
    ok, gone = train_population(cfg, [1, 2])
    assert ok.error is None and ok.result.updates == 2
    assert gone.result is None and "worker process died" in gone.error
    assert not (tmp_path / f"p{at}__s2" / "result.json").exists()
    kept = sorted(p.name for p in (tmp_path / f"p{at}__s2").glob("checkpoints/update-*"))
    assert kept == ([] if at == 64 else ["update-0000001"])  # only updates it finished


def test_a_hosted_member_failing_twice_keeps_its_first_error(tmp_path):
    """Its rewards (checked while its envs take their next step) fail it first; its env raising at
    that next step changes nothing: the one-line error is its single run's."""
    kw = dict(env="rlkit-test/NaNRewardThenRaises-v0", total_steps=256, num_steps=64)
    (alone,) = train_population(_cfg(tmp_path, "alone", **kw), [100])
    ok, bad = train_population(_cfg(tmp_path, "hosted", async_envs=True, **kw), [1, 100])
    assert ok.error is None and alone.error and bad.error == alone.error and "rewards" in bad.error


@pytest.mark.parametrize("where", ["open_logger", "stack_buffers"])
def test_a_population_failing_to_start_closes_its_env_worker(tmp_path, monkeypatch, where):
    import multiprocessing

    from rlkit.gym.population import engine as population, rollout as population_rollout

    def fails(*args, **kwargs):
        raise OSError("simulated start-up failure")

    monkeypatch.setattr(population if where == "open_logger" else population_rollout, where, fails)
    with pytest.raises(OSError, match="simulated"):
        train_population(_cfg(tmp_path, "p", total_steps=256, async_envs=True), [1, 2, 3])
    assert not [c for c in multiprocessing.active_children() if c.name == "rlkit-population-envs"]


def test_members_whose_envs_the_worker_cannot_make_are_failed_at_the_start():
    import numpy as np

    import tests.toy_envs  # noqa: F401  (registers the toy envs)

    host = population_host.HostedEnvs(population_host.HostedSpec("rlkit-test/WorkerFails-v0", 2, "", {}, [1, 2]), [3, 4])
    try:
        assert sorted(host.errors) == [3, 4] and all("\n" not in str(e) for e in host.errors.values())
        assert host.start(np.zeros((5, 2), np.int64), {3, 4})  # the worker still answers, with nothing stepped
        assert host.finish() == {}
        with pytest.raises(RuntimeError, match="failed before"):
            host.reset(3, 7)
    finally:
        host.close()
    assert not host.process.is_alive()


def test_a_population_starts_one_worker_not_a_worker_per_env(tmp_path, monkeypatch):
    """Its members' envs are made in the trainer (and the worker), never first in processes of
    their own; a population of one keeps its single run's own env workers."""
    import gymnasium as gym

    made = []
    real = gym.vector.AsyncVectorEnv.__init__

    def init(self, *args, **kwargs):
        made.append(self)
        real(self, *args, **kwargs)

    monkeypatch.setattr(gym.vector.AsyncVectorEnv, "__init__", init)
    out = train_population(_cfg(tmp_path, "p", total_steps=512, async_envs=True), [1, 2, 3])
    assert [o.error for o in out] == [None] * 3 and made == []
    resumed = population_start.resume_population([o.run_dir for o in out], total_steps=1024)
    assert [o.error for o in resumed] == [None] * 3 and made == []
    assert train_population(_cfg(tmp_path, "one", total_steps=256, async_envs=True), [1])[0].error is None
    assert len(made) == 1


def test_a_worker_stuck_in_an_env_is_killed_when_the_run_aborts(monkeypatch):
    """The worker ignores the trainer's SIGINT and SIGTERM; one stuck in an env's step cannot read
    "close": an aborting run kills it at once rather than wait for it. The wait of a plain close is
    made an hour here: a close that waited for it would hang (bounded by a minute)."""
    import signal
    import threading

    import numpy as np

    import tests.toy_envs  # noqa: F401  (registers the toy envs)

    monkeypatch.setattr(population_host, "CLOSE_SECONDS", 3600.0)
    host = population_host.HostedEnvs(population_host.HostedSpec("rlkit-test/HangsOnStep-v0", 1, "", {}, [1]), [1])
    assert host.errors == {} and host.start(np.zeros((2, 1), np.int64), {1})
    closed = threading.Event()
    threading.Thread(target=lambda: (host.close(abort=True), closed.set()), daemon=True).start()
    try:
        assert closed.wait(60), "an aborting close waited for the stuck worker"
        assert not host.process.is_alive() and host.process.exitcode == -signal.SIGKILL
    finally:
        host.process.kill()  # where the close hangs: the worker must not keep this process from exiting


@pytest.mark.parametrize("async_envs", [True, False])
def test_numpys_blas_runs_one_thread_in_a_population_and_in_a_single_run(tmp_path, async_envs):
    """Every run, population or single, with env workers or without, runs numpy's BLAS on one thread
    (OpenBLAS rounds by its thread count on some CPUs, and its spin-waiting threads collapse beside
    env workers); both restore the limit."""
    from threadpoolctl import threadpool_info

    from rlkit.gym import policies
    from rlkit.gym.trainer import train

    seen: dict[str, list] = {"population": [], "single": []}
    phase = ["population"]

    def blas_now():
        return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}

    real_value = policies.NumpyActor.value

    def value(self, obs):
        seen[phase[0]].append(blas_now())
        return real_value(self, obs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(policies.NumpyActor, "value", value)
        outside = blas_now()
        if not outside:
            pytest.skip("numpy's BLAS is not one threadpoolctl can see here")
        out = train_population(_cfg(tmp_path, "p", total_steps=512, async_envs=async_envs), [1, 2])
        assert blas_now() == outside
        phase[0] = "single"
        single = train(_cfg(tmp_path, "single", total_steps=512, async_envs=async_envs))
    assert [o.error for o in out] == [None, None] and single.updates >= 1
    assert seen["population"] and all(s == {1} for s in seen["population"])
    assert seen["single"] and all(s == {1} for s in seen["single"])
    assert blas_now() == outside
