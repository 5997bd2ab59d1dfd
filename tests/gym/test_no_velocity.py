"""``--env-wrappers no-velocity``: the NoVel tasks' observations without their velocities."""

import gymnasium as gym
import numpy as np
import pytest

import rlkit
from rlkit.gym.envs import make_env
from tests.robustness.helpers import error_line, run_cli

# The observation entries that are positions, angles or contacts: checked against the tasks' own
# documentation, not against the module's table.
POSITIONS = {"CartPole-v1": [0, 2], "Pendulum-v1": [0, 1], "LunarLander-v3": [0, 1, 4, 6, 7],
             "MountainCar-v0": [0], "MountainCarContinuous-v0": [0]}


@pytest.mark.parametrize("env_id", list(POSITIONS))
@pytest.mark.parametrize("training", [True, False])
def test_the_wrapped_observation_is_the_full_one_without_its_velocities(env_id, training):
    wrapped, full = make_env(env_id, wrappers="no-velocity", training=training), gym.make(env_id)
    keep = POSITIONS[env_id]
    assert wrapped.observation_space.shape == (len(keep),)
    assert np.array_equal(wrapped.observation_space.low, full.observation_space.low[keep])
    obs, _ = wrapped.reset(seed=3)
    ref, _ = full.reset(seed=3)
    assert np.array_equal(obs, ref[keep])
    full.action_space.seed(0)
    for _ in range(20):
        action = full.action_space.sample()
        obs, reward, terminated, truncated, _ = wrapped.step(action)
        ref, ref_reward, ref_terminated, ref_truncated, _ = full.step(action)
        assert np.array_equal(obs, ref[keep]) and obs in wrapped.observation_space
        assert (reward, terminated, truncated) == (ref_reward, ref_terminated, ref_truncated)
        if terminated or truncated:
            break


def test_lunarlanders_continuous_form_is_served_too():
    env = make_env("LunarLander-v3", {"continuous": True}, wrappers="no-velocity")
    assert env.observation_space.shape == (5,) and isinstance(env.action_space, gym.spaces.Box)


def test_a_run_trains_and_evaluates_on_the_partial_observation(tmp_path):
    result = rlkit.train(rlkit.TrainConfig(env="CartPole-v1", env_wrappers="no-velocity", num_envs=2, num_steps=64,
                                           num_minibatches=2, update_epochs=1, total_steps=256, eval_episodes=1,
                                           logdir=str(tmp_path)))
    agent, cfg = rlkit.Agent.load(result.run_dir)
    assert cfg.env_wrappers == "no-velocity" and agent.obs_shape == (2,)
    assert np.isfinite(result.eval_return_mean)


@pytest.mark.parametrize("env_id", ["Acrobot-v1", "rlkit-test/Pixels-v0"])
def test_a_task_without_known_velocities_is_one_line(tmp_path, env_id):
    line = error_line(run_cli("train", "--env", env_id, "--env-wrappers", "no-velocity", "--total-steps", "512",
                              "--logdir", str(tmp_path)))
    assert "no-velocity" in line and "CartPole" in line, line
    assert not any(tmp_path.iterdir())
