"""``--env-backend vector``: Gymnasium's vectorized CartPole in SAME_STEP mode keeps the
semantics of one env object per sub-env (physics, resets, terminations vs time-outs)."""

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import rlkit
from rlkit.errors import ConfigError
from rlkit.gym.envs import make_vec_env
from rlkit.gym.trainer import resume
from rlkit.io.checkpoint import resolve_checkpoint

X_LIMIT, THETA_LIMIT = 2.4, 12 * 2 * math.pi / 360


def test_vector_cartpole_steps_as_the_scalar_env_and_resets_in_the_same_step():
    envs = make_vec_env("CartPole-v1", 8, backend="vector")
    scalar = gym.make("CartPole-v1").unwrapped
    scalar.reset(seed=0)
    rng = np.random.default_rng(0)
    obs, _ = envs.reset(seed=3)
    lengths, ended = np.zeros(8, int), 0
    for _ in range(3000):
        state = envs.inner.state.copy()  # [4, N] float64, before the step
        actions = rng.integers(0, 2, 8)
        new_obs, rewards, terminated, truncated, info = envs.step(actions)
        lengths += 1
        assert (rewards == 1.0).all()  # no reward-0 reset steps (NEXT_STEP's) in the data
        for i in range(8):
            scalar.state, scalar.steps_beyond_terminated = state[:, i].copy(), None
            expected, _, fell, _, _ = scalar.step(int(actions[i]))
            done = terminated[i] or truncated[i]
            seen = info["final_obs"][i] if done else new_obs[i]
            np.testing.assert_allclose(seen, expected, atol=1e-5)
            assert terminated[i] == fell  # the pole fell or the cart left the track
            assert truncated[i] == (lengths[i] == 500 and not fell)  # the time limit, kept apart
            if done:
                assert info["_final_obs"][i] and np.abs(new_obs[i]).max() <= 0.05  # the next episode's start
                lengths[i], ended = 0, ended + 1
            else:
                assert not info or not info["_final_obs"][i]
        obs = new_obs
    assert ended > 50
    envs.close()


def test_a_time_limit_is_a_truncation_not_a_termination():
    envs = make_vec_env("CartPole-v1", 4, backend="vector", max_episode_steps=3)
    envs.reset(seed=0)
    for step in range(1, 4):
        _, _, terminated, truncated, info = envs.step(np.zeros(4, np.int64))
    assert truncated.all() and not terminated.any() and info["_final_obs"].all()
    envs.close()


@pytest.mark.parametrize("kwargs, words", [(dict(env="Pendulum-v1"), "no vectorized implementation"),
                                           (dict(async_envs=True), "drop --async-envs"),
                                           (dict(env="CartPole-v1", env_wrappers="atari"), "drop --env-wrappers")])
def test_what_the_vector_backend_cannot_run_is_one_line(tmp_path, kwargs, words):
    with pytest.raises(ConfigError, match=words) as info:
        rlkit.train(rlkit.TrainConfig(env_backend="vector", total_steps=512, logdir=str(tmp_path), progress=False,
                                      **kwargs))
    assert "\n" not in str(info.value)


def test_a_vector_backend_with_async_envs_is_refused_by_the_config_itself():
    """A sweep validates every run's config before it writes anything: the refusal is there."""
    with pytest.raises(ConfigError, match="drop --async-envs") as info:
        rlkit.TrainConfig(env_backend="vector", async_envs=True).validate()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("stack", ["no-velocity", "minigrid"])
def test_envpool_refuses_a_wrapper_stack_it_would_not_apply(stack):
    """EnvPool steps its own envs: a stack other than its Atari preprocessing would be recorded with
    the run but never applied (the run would train on the unwrapped observation)."""
    with pytest.raises(ConfigError, match=f"--env-wrappers {stack} needs --env-backend gymnasium") as info:
        rlkit.TrainConfig(env="CartPole-v1", env_backend="envpool", env_wrappers=stack).validate()
    assert "\n" not in str(info.value)


def _tensors(run_dir) -> dict[str, torch.Tensor]:
    return load_file(str(resolve_checkpoint(run_dir) / "tensors.safetensors"))


def test_a_vector_backend_run_repeats_and_resumes_to_the_same_bits(tmp_path):
    cfg = rlkit.preset("cartpole", env_backend="vector", total_steps=8 * 512, checkpoint_every=1024, anneal_lr=False,
                       eval_episodes=2, progress=False, logdir=str(tmp_path))
    first, second = rlkit.train(cfg.replace(run_name="a")), rlkit.train(cfg.replace(run_name="b"))
    rlkit.train(cfg.replace(run_name="legs", total_steps=4 * 512))
    resumed = resume(str(tmp_path / "legs"), total_steps=8 * 512)
    a = _tensors(first.run_dir)
    assert first.updates == 8 and int(a["optim.step"]) == 8 * 4 * 4  # every update trained (4 epochs x 4 minibatches)
    for other in (second, resumed):
        b = _tensors(other.run_dir)
        assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)
        assert other.eval_return_mean == first.eval_return_mean


@pytest.fixture(scope="module")
def envpool():
    return pytest.importorskip("envpool")


def test_envpool_cartpole_resets_in_the_same_step_and_keeps_time_outs_apart(envpool):
    envs = make_vec_env("CartPole-v1", 8, backend="envpool")
    first, _ = envs.reset(seed=3)
    rng = np.random.default_rng(0)
    lengths, ended, trajectory = np.zeros(8, int), 0, []
    for _ in range(3000):
        obs, rewards, terminated, truncated, info = envs.step(rng.integers(0, 2, 8))
        trajectory.append(obs)
        lengths += 1
        assert (rewards == 1.0).all()  # no reward-0 reset steps in the data
        for i in np.flatnonzero(terminated | truncated):
            final = info["final_obs"][i]
            fell = abs(final[0]) > X_LIMIT or abs(final[2]) > THETA_LIMIT
            assert terminated[i] == fell and truncated[i] == (not fell and lengths[i] == 500)
            assert np.abs(obs[i]).max() <= 0.05  # the next episode's start
            lengths[i], ended = 0, ended + 1
    assert ended > 50
    again, _ = envs.reset(seed=3)  # a seeded reset repeats the run's envs exactly
    rng = np.random.default_rng(0)
    assert np.array_equal(first, again)
    assert all(np.array_equal(envs.step(rng.integers(0, 2, 8))[0], seen) for seen in trajectory[:200])
    envs.close()
    limited = make_vec_env("CartPole-v1", 4, backend="envpool", max_episode_steps=3)
    limited.reset(seed=0)
    for _ in range(3):
        _, _, terminated, truncated, info = limited.step(np.zeros(4, np.int64))
    assert truncated.all() and not terminated.any() and info["_final_obs"].all()
    limited.close()


def test_envpool_atari_trains_and_resumes_to_the_same_bits(envpool, tmp_path):
    pytest.importorskip("ale_py")
    cfg = rlkit.preset("atari", env="ALE/Pong-v5", env_backend="envpool", total_steps=4 * 128, num_envs=2,
                       num_steps=64, num_minibatches=2, update_epochs=1, anneal_lr=False, checkpoint_every=256,
                       eval_episodes=1, eval_max_steps=50, progress=False, logdir=str(tmp_path))
    straight = rlkit.train(cfg.replace(run_name="straight"))
    rlkit.train(cfg.replace(run_name="legs", total_steps=2 * 128))
    resumed = resume(str(tmp_path / "legs"), total_steps=4 * 128)
    a, b = _tensors(straight.run_dir), _tensors(resumed.run_dir)
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ConfigError, match="with --env-wrappers atari"):
        rlkit.train(cfg.replace(env_wrappers="", run_name="raw"))


def test_a_default_run_name_is_one_plain_folder_name_for_any_env_id(tmp_path):
    result = rlkit.train(rlkit.TrainConfig(env="gymnasium.envs.classic_control:CartPole-v1", total_steps=512,
                                           eval_episodes=0, logdir=str(tmp_path), progress=False))
    name = Path(result.run_dir).name
    assert Path(result.run_dir).parent == tmp_path and ":" not in name and "/" not in name
    assert name.startswith("gymnasium.envs.classic_control-CartPole-v1__ppo__s1__")


def test_a_group_of_the_shared_cartpole_steps_as_its_own_env_whatever_the_others_do():
    """A population's members share one vectorized CartPole, each a group with its own reset
    generator: group g seeded s gives the bits of an env of one group seeded s, whoever else steps
    (and ends episodes) beside it."""
    from rlkit.gym.backends import make_vector_backend

    n, groups, steps = 3, 4, 1500
    alone = make_vector_backend("CartPole-v1", n, {})
    shared = make_vector_backend("CartPole-v1", n * groups, {}, groups=groups)
    first_alone, _ = alone.reset(seed=7)
    for g, seed in enumerate([11, 7, 3, 5]):
        first = shared.reset_group(g, seed)
    np.testing.assert_array_equal(shared.reset_group(1, 7), first_alone)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(steps):
        actions = rng.integers(0, 2, n * groups)
        a = alone.step(actions[n:2 * n])
        s = shared.step(actions)
        cols = slice(n, 2 * n)
        for got, want in zip(s[:4], a[:4]):
            np.testing.assert_array_equal(got[cols], want)
        for i in np.flatnonzero(a[2] | a[3]):
            np.testing.assert_array_equal(s[4]["final_obs"][n + i], a[4]["final_obs"][i])
        ended += int((a[2] | a[3]).sum())
    assert ended > 20 and first is not None  # resets of the group happened along the way
    with pytest.raises(ValueError, match="groups"):
        make_vector_backend("CartPole-v1", 5, {}, groups=2)
