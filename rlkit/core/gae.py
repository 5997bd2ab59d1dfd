"""Generalized Advantage Estimation (Schulman et al. 2016) as a pure function.

Terminations and truncations are kept apart (Pardo et al. 2018, "Time Limits in RL"): a time-out bootstraps from
V(final observation); a termination does not; neither lets the recursion cross a reset.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np
import torch


class GAEResult(NamedTuple):
    advantages: torch.Tensor
    """``[T, N]`` GAE(gamma, lambda) advantages."""
    returns: torch.Tensor
    """``[T, N]`` lambda-returns, advantages + values (the value targets)."""


def compute_gae(
    rewards: torch.Tensor | np.ndarray,
    values: torch.Tensor | np.ndarray,
    next_values: torch.Tensor | np.ndarray,
    terminated: torch.Tensor | np.ndarray,
    done: torch.Tensor | np.ndarray,
    gamma: float,
    lam: float,
) -> GAEResult:
    """GAE over a rollout of ``T`` steps from ``N`` environments.

    Args (torch tensors, or numpy arrays: converted to float32 / bool tensors):
        rewards: ``[T, N]`` reward of transition t.
        values: ``[T, N]`` V(s_t).
        next_values: ``[T, N]`` V(s_{t+1}) of the *true* next state: the final observation
            when the episode ended at t (used only on truncation), else V of the next obs.
        terminated: ``[T, N]`` bool, the MDP ended at t (no bootstrap).
        done: ``[T, N]`` bool, ``terminated | truncated``: the recursion stops at t.
        gamma: discount; lam: GAE lambda.

    Returns:
        ``GAEResult(advantages [T, N], returns [T, N])``:
        ``delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t`` and
        ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}``.
    """
    for name, value in (("gamma", gamma), ("lam", lam)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value <= 1.0:
            raise ValueError(f"compute_gae: {name} must be a number in [0, 1], got {value!r}")
    rewards, values, next_values = (torch.as_tensor(x, dtype=torch.float32) if isinstance(x, np.ndarray) else x
                                    for x in (rewards, values, next_values))
    terminated, done = (torch.as_tensor(x, dtype=torch.bool) if isinstance(x, np.ndarray) else x
                        for x in (terminated, done))
    if not (rewards.shape == values.shape == next_values.shape == terminated.shape == done.shape):
        raise ValueError(
            "compute_gae: rewards, values, next_values, terminated and done must share one [T, N] shape, got "
            f"{[tuple(x.shape) for x in (rewards, values, next_values, terminated, done)]}")
    if rewards.device.type == "cpu":
        # The backward recursion is T tiny steps: numpy's per-op cost is a fraction of torch's.
        adv = _gae_numpy(rewards.numpy(), values.numpy(), next_values.numpy(),
                         terminated.numpy(), done.numpy(), gamma, lam)
        advantages = torch.from_numpy(adv)
    else:
        advantages = _gae_torch(rewards, values, next_values, terminated, done, gamma, lam)
    return GAEResult(advantages, advantages + values)


def _gae_numpy(rewards: np.ndarray, values: np.ndarray, next_values: np.ndarray,
               terminated: np.ndarray, done: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    not_term = 1.0 - terminated.astype(rewards.dtype)
    not_done = 1.0 - done.astype(rewards.dtype)
    deltas = rewards + gamma * not_term * next_values - values
    decay = (gamma * lam) * not_done
    if deltas.shape[1] <= 16:
        # Few envs (e.g. 1 x 2048 for MuJoCo): a plain-float loop per env beats T numpy calls on
        # [N]-vectors by ~10x. Same recursion, in float64, stored as float32.
        adv_rows = []
        for d_col, c_col in zip(deltas.T.tolist(), decay.T.tolist()):
            last, col = 0.0, [0.0] * len(d_col)
            for t in range(len(d_col) - 1, -1, -1):
                last = d_col[t] + c_col[t] * last
                col[t] = last
            adv_rows.append(col)
        return np.array(adv_rows, dtype=deltas.dtype).T.copy()
    adv = np.empty_like(deltas)
    last = np.zeros_like(deltas[0])
    for t in range(deltas.shape[0] - 1, -1, -1):
        last = deltas[t] + decay[t] * last
        adv[t] = last
    return adv


def _gae_torch(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor,
               terminated: torch.Tensor, done: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
    not_term = 1.0 - terminated.to(rewards.dtype)
    not_done = 1.0 - done.to(rewards.dtype)
    deltas = rewards + gamma * not_term * next_values - values
    decay = (gamma * lam) * not_done
    adv = torch.empty_like(deltas)
    last = torch.zeros_like(deltas[0])
    for t in range(deltas.shape[0] - 1, -1, -1):
        last = deltas[t] + decay[t] * last
        adv[t] = last
    return adv
