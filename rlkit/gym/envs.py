"""Vectorized Gymnasium environments with explicit autoreset semantics and clear errors."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlkit.errors import EnvError
from rlkit.errors import one_line as _one_line


def check_env_id(env_id: str) -> None:
    """Raise :class:`EnvError` unless ``env_id`` is registered with Gymnasium."""
    try:
        gym.spec(env_id)
    except gym.error.Error as exc:
        raise EnvError(f"unknown environment id {env_id!r}: {_one_line(exc)}") from None


def make_vec_env(env_id: str, num_envs: int, async_envs: bool = False, **env_kwargs: Any) -> gym.vector.VectorEnv:
    """``num_envs`` copies of ``env_id`` in SAME_STEP autoreset mode.

    SAME_STEP (Gymnasium 1.x): when an episode ends at step t, ``step`` returns the reset
    observation and puts the true final observation in ``info["final_obs"]``; so no
    transition across a reset is ever formed, and a truncation can bootstrap from
    V(final observation).
    """
    check_env_id(env_id)
    try:
        return gym.make_vec(
            env_id, num_envs=num_envs, vectorization_mode="async" if async_envs else "sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP, "copy": False},
            disable_env_checker=True, **env_kwargs)
    except EnvError:
        raise
    except Exception as exc:  # a broken env constructor, a missing optional dependency, ...
        raise EnvError(f"could not make {env_id!r}: {_one_line(exc)}") from exc


def step_envs(envs: gym.vector.VectorEnv, env_id: str, actions: np.ndarray) -> tuple[Any, ...]:
    """``envs.step`` with worker failures reported as one line naming the env."""
    try:
        return envs.step(actions)
    except Exception as exc:
        raise EnvError(f"{env_id} raised while stepping: {type(exc).__name__}: {_one_line(exc)}") from exc


def reset_envs(envs: gym.vector.VectorEnv, env_id: str, seed: int) -> np.ndarray:
    try:
        obs, _ = envs.reset(seed=seed)
    except Exception as exc:
        raise EnvError(f"{env_id} raised on reset: {type(exc).__name__}: {_one_line(exc)}") from exc
    return obs
