"""MiniGrid through the ``minigrid`` wrapper stack and preset (the stack's view is checked against
the env's own observation; training, loading and evaluation with a tiny budget)."""

import json

import numpy as np
import pytest

import rlkit
from rlkit.errors import UnsupportedSpaceError
from rlkit.gym.envs import make_env

pytest.importorskip("minigrid")


def test_the_stack_is_the_flattened_view_of_the_grid():
    env = make_env("MiniGrid-DoorKey-5x5-v0", wrappers="minigrid")
    plain = make_env("MiniGrid-DoorKey-5x5-v0")
    try:
        obs, _ = env.reset(seed=3)
        raw, _ = plain.reset(seed=3)
        assert env.observation_space.shape == (147,) and obs.dtype == np.uint8
        assert np.array_equal(obs, raw["image"].reshape(-1))
        for action in (2, 1, 2, 3, 0):
            obs, *_ = env.step(action)
            raw, *_ = plain.step(action)
            assert np.array_equal(obs, raw["image"].reshape(-1))
    finally:
        env.close(), plain.close()


def test_without_the_stack_the_mission_text_is_refused_in_one_line(tmp_path):
    with pytest.raises(UnsupportedSpaceError, match="MissionSpace|Text") as err:
        rlkit.train(rlkit.preset("minigrid", env_wrappers="", total_steps=1024, progress=False,
                                 logdir=str(tmp_path)))
    assert "\n" not in str(err.value)


def test_the_minigrid_preset_trains_loads_and_acts(tmp_path):
    result = rlkit.train(rlkit.preset("minigrid", total_steps=2048, eval_episodes=2, progress=False,
                                      logdir=str(tmp_path), run_name="m"))
    assert result.env == "MiniGrid-DoorKey-5x5-v0" and result.updates == 2 and np.isfinite(result.eval_return_mean)
    stored = json.loads((tmp_path / "m" / "config.json").read_text())
    assert stored["env_wrappers"] == "minigrid" and stored["num_minibatches"] == 16 and stored["norm_obs"]
    assert stored["clip_vloss"] is False
    agent, config = rlkit.Agent.load(result.run_dir)
    assert config.env_wrappers == "minigrid" and agent.act(np.zeros(147, np.uint8)).shape == ()
