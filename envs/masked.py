"""``rlkit/InvalidActions-v0``: a task where most actions are invalid at each step and an invalid
action ends the episode, after Huang & Ontañón (2022, "A Closer Look at Invalid Action Masking in
Policy Gradient Algorithms").

Each step shows a target (a ``Discrete(n)`` observation); ``valid`` of the ``n`` actions are
allowed (the target and ``valid - 1`` others drawn at random). The target earns +1, another allowed
action 0, a forbidden one -1 and ends the episode. Episodes last ``length`` steps. The allowed set
is given both ways agents read masks: ``info["action_mask"]`` after every reset and step, and the
env's ``action_masks()`` (sb3-contrib's ``MaskablePPO`` convention).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class InvalidActions(gym.Env):
    """``n`` actions, ``valid`` of them allowed per step, ``length`` steps per episode."""

    def __init__(self, n: int = 16, valid: int = 4, length: int = 25) -> None:
        if any(isinstance(x, bool) or not isinstance(x, int) for x in (n, valid, length)) or not 1 <= valid <= n \
                or length < 1:
            raise ValueError(f"need integers 1 <= valid <= n and length >= 1, got n={n!r}, valid={valid!r}, "
                             f"length={length!r}")
        self.n, self.valid, self.length = n, valid, length
        self.observation_space = gym.spaces.Discrete(n)
        self.action_space = gym.spaces.Discrete(n)
        self.target, self.t, self.mask = 0, 0, np.ones(n, bool)

    def _draw(self) -> tuple[int, dict[str, Any]]:
        self.target = int(self.np_random.integers(self.n))
        others = self.np_random.permutation(np.delete(np.arange(self.n), self.target))[: self.valid - 1]
        self.mask = np.zeros(self.n, bool)
        self.mask[[self.target, *others]] = True
        return self.target, {"action_mask": self.mask.copy()}

    def action_masks(self) -> np.ndarray:
        """``[n]`` bool: the actions allowed now."""
        return self.mask.copy()

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return self._draw()

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        action = int(action)
        if not self.mask[action]:
            return self.target, -1.0, True, False, {"action_mask": self.mask.copy()}
        reward = 1.0 if action == self.target else 0.0
        self.t += 1
        obs, info = self._draw()
        return obs, reward, False, self.t >= self.length, info


def register_masked_envs() -> None:
    """Register ``rlkit/InvalidActions-v0`` with Gymnasium (kwargs as :class:`InvalidActions`'s)."""
    if "rlkit/InvalidActions-v0" not in gym.registry:
        gym.register("rlkit/InvalidActions-v0", entry_point="rlkit_envs.masked:InvalidActions")
