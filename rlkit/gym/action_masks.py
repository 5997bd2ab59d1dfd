"""Action masks as an env gives them, for ``Discrete`` actions: a method ``action_masks()`` on the
env, or ``info["action_mask"]`` from ``reset`` and ``step`` (``[A]`` booleans, True = allowed), as
sb3-contrib's MaskablePPO reads them. The policy that applies them is :mod:`rlkit.gym.masking`'s.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


def has_action_masks(env: gym.Env) -> bool:
    """Whether ``env`` gives action masks (its ``action_masks()`` method, or ``info["action_mask"]``
    after a reset; the probe reset is unseeded, and a run reseeds before its first episode)."""
    if callable(getattr(env.unwrapped, "action_masks", None)):
        return True
    return "action_mask" in env.reset()[1]


def env_mask(env: gym.Env, info: dict[str, Any], n_actions: int) -> np.ndarray:
    """``[A]`` bool mask of one env's current observation (``action_masks()`` first, then the info)."""
    method = getattr(env.unwrapped, "action_masks", None)
    mask = method() if callable(method) else info.get("action_mask")
    return check_mask(mask, n_actions)


def check_mask(mask: Any, n_actions: int) -> np.ndarray:
    """A mask as ``[..., A]`` bool, or a ``ValueError`` naming what is wrong with it."""
    if mask is None:
        raise ValueError("the env gave no action mask for this observation")
    mask = np.asarray(mask)
    if mask.shape[-1:] != (n_actions,) or not (mask.dtype == np.bool_ or np.isin(mask, (0, 1)).all()):
        raise ValueError(f"an action mask must be {n_actions} booleans, got {mask.dtype} of shape {mask.shape}")
    mask = mask.astype(bool)
    if not mask.any(-1).all():
        raise ValueError("an action mask allows no action")
    return mask
