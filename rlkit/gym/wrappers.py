"""Env wrapper stacks chosen by name (``--env-wrappers atari``), registered like heads and encoders.

A stack wraps every env rlkit makes for a run: its training envs (in process or in async workers)
and its evaluation env, which may differ (Atari trains per life on clipped rewards and is
evaluated on the game score over whole games). The stack's name is kept in the run's config, so
``--resume`` and ``rlkit eval`` build the same envs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from rlkit.errors import ConfigError
from rlkit.gym.no_velocity import no_velocity

log = logging.getLogger("rlkit")


@dataclass(frozen=True)
class WrapperStack:
    """What a named stack does to an env made with ``gym.make``."""

    train: Callable[[gym.Env], gym.Env]
    """Wraps a training env."""
    evaluate: Callable[[gym.Env], gym.Env]
    """Wraps an evaluation env (returns are what the stack reports as the task's score)."""
    make_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments ``gym.make`` needs beneath the stack (a run's own ``env_kwargs`` win)."""


WRAPPER_STACKS: dict[str, WrapperStack] = {}


def register_wrappers(name: str, stack: WrapperStack) -> None:
    """Make ``stack`` available as ``--env-wrappers name``."""
    WRAPPER_STACKS[name] = stack


def check_wrappers(name: str) -> None:
    """A one-line :class:`ConfigError` unless ``name`` is ``""`` (none) or a registered stack."""
    if name and name not in WRAPPER_STACKS:
        raise ConfigError(f"unknown env_wrappers {name!r}; choose from '' (none), {', '.join(WRAPPER_STACKS)}")


def make_kwargs(name: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``gym.make`` keyword arguments for an env under stack ``name``: the stack's, then the run's."""
    return {**(WRAPPER_STACKS[name].make_kwargs if name else {}), **env_kwargs}


def wrap(env: gym.Env, name: str, training: bool) -> gym.Env:
    """``env`` under stack ``name`` (unchanged for ``""``)."""
    if not name:
        return env
    stack = WRAPPER_STACKS[name]
    return stack.train(env) if training else stack.evaluate(env)


# ----------------------------------------------------------------------------------------- Atari
class EpisodicLife(gym.Wrapper):
    """A lost life ends the episode for learning (``terminated``), while the game goes on: the
    next reset is a no-op step unless the game is over (Mnih et al. 2015; Stable-Baselines3's
    ``EpisodicLifeEnv``). A reset with a seed is always a new game, so a run's seeded resets (its
    checkpoints' episode boundaries) start from the same state on resume."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives, self.game_over = 0, True

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if self.game_over or seed is not None:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(seed=seed, options=options)
        self.game_over, self.lives = False, self.env.unwrapped.ale.lives()
        return obs, info


class FireReset(gym.Wrapper):
    """Press FIRE (then the next action) after each reset, for games that wait for it to start
    (Stable-Baselines3's ``FireResetEnv``)."""

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset(options=options)
        return obs, info


class FireOnLifeLoss(gym.Wrapper):
    """Press FIRE after each lost life while the game goes on (its reward is the step's too): an
    evaluation plays whole games with a policy that trained per life behind :class:`FireReset`,
    so it never had to learn to relaunch the ball."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self.lives and not (terminated or truncated):
            obs, more, terminated, truncated, info = self.env.step(1)
            reward = float(reward) + float(more)
        self.lives = lives
        return obs, reward, terminated, truncated, info


ATARI_EVAL_STEPS = 27_000
"""ALE's limit of 108,000 frames per game, in agent steps of 4 frames: evaluation plays whole games."""


def _atari(env: gym.Env, training: bool) -> gym.Env:
    """Gymnasium's ``AtariPreprocessing`` (30 no-op starts where the game has a NOOP, frame skip 4
    with max-pooling, 84x84 grayscale), then for training episodic life and rewards clipped to their sign, FIRE on reset
    where the game needs it (and, in evaluation, after each lost life; evaluation games last up to
    ALE's 108,000 frames), and the last 4 frames stacked: the PPO Atari setting of Huang et al.
    (2022, "The 37 implementation details of PPO"), as Stable-Baselines3's ``AtariWrapper``."""
    noops = 30 if env.unwrapped.get_action_meanings()[0] == "NOOP" else 0  # board games have no NOOP
    env = gym.wrappers.AtariPreprocessing(env, noop_max=noops, frame_skip=4, screen_size=84, grayscale_obs=True)
    if training:
        env = EpisodicLife(env)
    if "FIRE" in env.unwrapped.get_action_meanings()[1:2]:
        env = FireReset(env) if training else FireOnLifeLoss(FireReset(env))
    if training:
        env = gym.wrappers.TransformReward(env, lambda r: float(np.sign(r)))
    else:
        env = gym.wrappers.TimeLimit(env, ATARI_EVAL_STEPS)
    return gym.wrappers.FrameStackObservation(env, 4)


register_wrappers("atari", WrapperStack(
    train=lambda env: _atari(env, True), evaluate=lambda env: _atari(env, False),
    make_kwargs={"frameskip": 1}))


# -------------------------------------------------------------------------------------- MiniGrid
def _minigrid(env: gym.Env) -> gym.Env:
    """MiniGrid's partial 7x7 view of (object, colour, state) indices, flattened to 147 numbers for
    an MLP: what the RL Baselines3 Zoo's MiniGrid agents read (its ``FlatObsWrapper``) without the
    mission string, which is one fixed sentence per MiniGrid task (Chevalier-Boisvert et al. 2023).
    The agent's direction is dropped, as there. BabyAI's missions change every episode: without
    them its goals cannot be known, which a warning says."""
    from minigrid.wrappers import ImgObsWrapper

    space = env.observation_space
    if not (isinstance(space, gym.spaces.Dict) and "image" in space.spaces):
        raise ConfigError(f"the minigrid wrapper stack needs a MiniGrid env (a Dict observation with an 'image'); "
                          f"this env's observation space is {space}")
    env_id = env.spec.id if env.spec is not None else ""
    if env_id.startswith("BabyAI-") and env_id not in _WARNED:
        _WARNED.add(env_id)
        log.warning("the minigrid wrapper stack drops the mission; %s's missions change every episode, so a "
                    "policy trained on it cannot know its goal", env_id)
    return gym.wrappers.FlattenObservation(ImgObsWrapper(env))


_WARNED: set[str] = set()


register_wrappers("minigrid", WrapperStack(train=_minigrid, evaluate=_minigrid))



register_wrappers("no-velocity", WrapperStack(train=no_velocity, evaluate=no_velocity))
