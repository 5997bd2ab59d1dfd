"""The ``no-velocity`` wrapper stack (registered in :mod:`rlkit.gym.wrappers`): classic-control tasks with their velocities removed from the
observation, so that acting well needs memory (positions seen over several steps).

The tasks and the entries removed are those of sb3-contrib's "NoVel" benchmark of recurrent PPO
(the RL Baselines3 Zoo's ``MaskVelocityWrapper``, which zeroes them; here they are dropped, so the
observation is smaller and nothing in it is a constant).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlkit.errors import ConfigError

VELOCITIES: dict[str, tuple[int, tuple[int, ...]]] = {
    "CartPole": (4, (1, 3)),  # x, x', theta, theta'
    "Pendulum": (3, (2,)),  # cos theta, sin theta, theta'
    "LunarLander": (8, (2, 3, 5)),  # x, y, vx, vy, angle, angular velocity, legs
    "LunarLanderContinuous": (8, (2, 3, 5)),
    "MountainCar": (2, (1,)),  # position, velocity
    "MountainCarContinuous": (2, (1,)),
}
"""Per task family (the env id without namespace and version): the observation's length and the
indices of its velocities."""


def task_family(env: gym.Env) -> str:
    """``CartPole`` for ``CartPole-v1`` (and ``ns/CartPole-v1``); "" when the env has no spec."""
    env_id = env.spec.id if env.spec is not None else ""
    return env_id.rsplit("/", 1)[-1].split("-v")[0]


def kept_indices(env: gym.Env) -> np.ndarray:
    """The indices of ``env``'s observation that are not velocities, or a one-line
    :class:`ConfigError` for a task the stack does not know (or whose observation has changed)."""
    family, space = task_family(env), env.observation_space
    if family not in VELOCITIES:
        raise ConfigError(f"the no-velocity wrapper stack knows {', '.join(VELOCITIES)}; "
                          f"{env.spec.id if env.spec else env!r} is none of them")
    size, velocities = VELOCITIES[family]
    if not (isinstance(space, gym.spaces.Box) and space.shape == (size,)):
        raise ConfigError(f"the no-velocity wrapper stack expects {family}'s observation of {size} numbers; this "
                          f"env's observation space is {space}")
    return np.array([i for i in range(size) if i not in velocities])


def no_velocity(env: gym.Env) -> gym.Env:
    """``env`` with the velocities dropped from its observation (see :data:`VELOCITIES`)."""
    keep = kept_indices(env)
    space = env.observation_space
    low, high = space.low[keep], space.high[keep]  # type: ignore[attr-defined]
    return gym.wrappers.TransformObservation(env, lambda obs: np.asarray(obs)[keep],
                                             gym.spaces.Box(low, high, dtype=space.dtype))  # type: ignore[arg-type]

