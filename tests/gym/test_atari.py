"""Wrapper stacks and the ``atari`` / ``minatar`` presets.

The life and FIRE wrappers are checked on a toy game whose lives and start button are known; the
whole stack on a real ALE game (Breakout, the ROMs ship with ale-py) with a tiny budget.
"""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import rlkit
from rlkit.errors import ConfigError
from rlkit.gym.envs import make_env, make_vec_env
from rlkit.gym.wrappers import ATARI_EVAL_STEPS, EpisodicLife, FireOnLifeLoss, FireReset
from rlkit.gym.trainer import resume
from rlkit.io.checkpoint import resolve_checkpoint


class _Lives:
    def __init__(self) -> None:
        self.left = 3

    def lives(self) -> int:
        return self.left


class ToyGame(gym.Env):
    """A game of 3 lives: action 3 loses one (reward 5); the game is over at 0. Action 1 is FIRE,
    without which every step of a new game, or after a lost life, reports ``waiting``."""

    observation_space = gym.spaces.Box(0, 255, (1,), np.uint8)
    action_space = gym.spaces.Discrete(4)

    def __init__(self) -> None:
        self.ale, self.resets, self.fired = _Lives(), 0, False

    def get_action_meanings(self) -> list[str]:
        return ["NOOP", "FIRE", "RIGHT", "LEFT"]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.ale.left, self.resets, self.fired = 3, self.resets + 1, False
        return np.array([self.ale.left], np.uint8), {}

    def step(self, action):
        self.fired |= action == 1
        if action == 3:
            self.ale.left, self.fired = self.ale.left - 1, False
        obs = np.array([self.ale.left], np.uint8)
        return obs, 5.0 * (action == 3), self.ale.left == 0, False, {"waiting": not self.fired}


def test_a_lost_life_ends_the_learning_episode_and_the_game_goes_on():
    env = EpisodicLife(ToyGame())
    env.reset(seed=0)
    assert env.step(0)[2] is False
    obs, reward, terminated, truncated, _ = env.step(3)
    assert terminated and not truncated and reward == 5.0 and int(obs[0]) == 2
    obs, _ = env.reset()  # not a new game: a no-op step, the lost life stays lost
    assert int(obs[0]) == 2 and env.unwrapped.resets == 1
    env.step(3)
    env.step(3)  # the last life: the game is over
    env.reset()
    assert env.unwrapped.ale.left == 3 and env.unwrapped.resets == 2


def test_a_seeded_reset_is_always_a_new_game():
    """A run's scheduled checkpoints reset its envs with seeds; a resume must find the same state."""
    env = EpisodicLife(ToyGame())
    env.reset(seed=0)
    env.step(3)
    obs, _ = env.reset(seed=7)
    assert int(obs[0]) == 3 and env.unwrapped.resets == 2


def test_fire_reset_presses_fire_after_every_reset():
    env = FireReset(ToyGame())
    env.reset(seed=0)
    assert env.unwrapped.fired and env.step(0)[4]["waiting"] is False


def test_evaluation_presses_fire_after_a_lost_life():
    """A policy trained per life never learns to relaunch: evaluation does it, adding no reward."""
    env = FireOnLifeLoss(FireReset(ToyGame()))
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(3)
    assert reward == 5.0 and not terminated and env.unwrapped.fired and info["waiting"] is False
    env.step(3)
    _, _, terminated, _, _ = env.step(3)  # the last life: game over, nothing pressed after it
    assert terminated and not env.unwrapped.fired


def test_unknown_wrappers_are_one_line():
    with pytest.raises(ConfigError, match="unknown env_wrappers 'atary'"):
        rlkit.TrainConfig(env_wrappers="atary")


@pytest.fixture(scope="module")
def ale():
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")


def test_the_atari_stack_trains_per_life_on_clipped_rewards_and_evaluates_whole_games(ale):
    train, evaluate = make_env("ALE/Breakout-v5", {}, "atari", training=True), make_env("ALE/Breakout-v5", {}, "atari")
    try:
        for env in (train, evaluate):
            assert env.observation_space.shape == (4, 84, 84) and env.observation_space.dtype == np.uint8
            assert env.unwrapped._frameskip == 1  # the stack skips frames itself (max-pooling the last two)
        lives = {}
        for name, env in (("train", train), ("eval", evaluate)):
            env.reset(seed=3)
            env.action_space.seed(3)
            for _ in range(2000):
                _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
                assert name == "eval" or reward in (-1.0, 0.0, 1.0)
                if terminated or truncated:
                    break
            lives[name] = env.unwrapped.ale.lives()
        assert lives["train"] == 4  # the first lost life ended the training episode
        assert lives["eval"] == 0  # evaluation plays the whole game
        assert evaluate.spec.max_episode_steps == ATARI_EVAL_STEPS  # ALE's 108,000 frames, not a shorter cap
        evaluate.reset(seed=4)
        for steps in range(1, 3000):  # a policy that never presses FIRE still plays the game to its end
            _, _, terminated, truncated, _ = evaluate.step(0)
            if terminated or truncated:
                break
        assert terminated and evaluate.unwrapped.ale.lives() == 0
    finally:
        train.close()
        evaluate.close()


def _tensors(run_dir) -> dict[str, torch.Tensor]:
    return load_file(str(resolve_checkpoint(run_dir) / "tensors.safetensors"))


def test_the_atari_preset_runs_resumes_bit_identically_and_evaluates(ale, tmp_path):
    cfg = rlkit.preset("atari", total_steps=4 * 128, num_envs=2, num_steps=64, num_minibatches=2, update_epochs=1,
                       anneal_lr=False, checkpoint_every=256, eval_episodes=1, eval_max_steps=50, progress=False,
                       logdir=str(tmp_path))
    straight = rlkit.train(cfg.replace(run_name="straight"))
    rlkit.train(cfg.replace(run_name="legs", total_steps=2 * 128))
    resumed = resume(str(tmp_path / "legs"), total_steps=4 * 128)
    a, b = _tensors(straight.run_dir), _tensors(resumed.run_dir)
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.eval_return_mean == straight.eval_return_mean
    stored = json.loads((tmp_path / "legs" / "config.json").read_text())
    assert stored["env_wrappers"] == "atari" and stored["env"] == "ALE/Breakout-v5"
    agent, loaded = rlkit.Agent.load(straight.run_dir)
    assert loaded.env_wrappers == "atari" and agent.act(np.zeros((4, 84, 84), np.uint8)).shape == ()


def test_async_workers_build_the_same_stack(ale):
    envs = make_vec_env("ALE/Pong-v5", 2, async_envs=True, wrappers="atari")
    try:
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    finally:
        envs.close()


def test_the_minatar_preset_runs(tmp_path):
    pytest.importorskip("minatar")
    result = rlkit.train(rlkit.preset("minatar", total_steps=512, num_envs=2, num_steps=64, eval_episodes=1,
                                      eval_max_steps=100, progress=False, logdir=str(tmp_path), run_name="m"))
    assert result.env == "MinAtar/Breakout-v1" and result.updates == 4
    with pytest.raises(ConfigError, match="both choose an environment"):
        rlkit.preset("minatar", "atari")


def test_ale_ids_without_a_namespace_are_found(ale):
    """CleanRL's ``BreakoutNoFrameskip-v4`` is an ale-py id too: known without registering it first."""
    import subprocess
    import sys

    code = "from rlkit.gym.envs import check_env_id; check_env_id('BreakoutNoFrameskip-v4'); print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-1500:]
