"""``rlkit/InvalidActions-v0``, the masked task the parity recipe runs: its rules, its two mask
conventions, and a masked run on it."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import rlkit
from rlkit.gym.envs import check_env_id


def test_the_rules_and_both_mask_conventions_agree():
    check_env_id("rlkit/InvalidActions-v0")
    env = gym.make("rlkit/InvalidActions-v0", n=8, valid=3, length=5)
    obs, info = env.reset(seed=0)
    for _ in range(4):
        mask = env.unwrapped.action_masks()
        assert np.array_equal(mask, info["action_mask"]) and mask.sum() == 3 and mask[obs]
        other = int(np.flatnonzero(mask & (np.arange(8) != obs))[0])
        obs, reward, terminated, truncated, info = env.step(other)
        assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.step(obs)[1:4] == (1.0, False, True)  # the target, on the last of 5 steps
    env.reset(seed=1)
    forbidden = int(np.flatnonzero(~env.unwrapped.action_masks())[0])
    assert env.step(forbidden)[1:3] == (-1.0, True)
    with pytest.raises(ValueError, match="valid"):
        gym.make("rlkit/InvalidActions-v0", n=4, valid=5)


def test_the_id_is_known_to_a_fresh_process_without_importing_rlkit_envs():
    code = "from rlkit.gym.envs import check_env_id; check_env_id('rlkit/InvalidActions-v0'); print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-1500:]


def test_a_masked_run_learns_the_target_without_a_forbidden_action(tmp_path):
    result = rlkit.train(rlkit.preset("cartpole", env="rlkit/InvalidActions-v0", total_steps=8192, eval_episodes=5,
                                      progress=False, logdir=str(tmp_path), run_name="m"))
    # Masked, every evaluation episode lasts its 25 steps with no -1; a uniform choice among the 4
    # allowed actions earns 25/4 on average, so more than 12 is learned.
    assert result.eval_return_mean > 12.0
