"""Episode accounting in raw rewards: what ``charts/episodic_return`` reports."""

from __future__ import annotations

from collections import deque

import numpy as np


class Episodes:
    """Undiscounted return and length of the episodes in flight (raw rewards)."""

    def __init__(self, num_envs: int) -> None:
        self.ret = np.zeros(num_envs, np.float64)
        self.len = np.zeros(num_envs, np.int64)
        self.finished: list[tuple[float, int]] = []
        self.recent: deque[float] = deque(maxlen=100)

    def rollout(self, rewards: np.ndarray, dones: np.ndarray) -> None:
        """Account a rollout's raw ``rewards [T, N]`` and ``dones [T, N]`` (once per rollout, not
        per step: one cumulative sum instead of T small updates); episodes finish in time order."""
        sums = np.cumsum(rewards, axis=0, dtype=np.float64)
        base = np.zeros(rewards.shape[1])  # cumulative reward at each env's last episode start
        start = np.zeros(rewards.shape[1], np.int64)  # step index of that start
        for t, i in zip(*np.nonzero(dones)):
            ret = float(self.ret[i] + sums[t, i] - base[i])
            self.finished.append((ret, int(self.len[i] + t + 1 - start[i])))
            self.recent.append(ret)
            self.ret[i], self.len[i], base[i], start[i] = 0.0, 0, sums[t, i], t + 1
        self.ret += sums[-1] - base
        self.len += rewards.shape[0] - start

    def reset(self) -> None:
        self.ret[:] = 0.0
        self.len[:] = 0

    def pop(self) -> list[tuple[float, int]]:
        out, self.finished = self.finished, []
        return out
