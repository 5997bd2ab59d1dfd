"""Plain PPO's batch source: every epoch runs over the latest rollout, with GAE advantages."""

from __future__ import annotations

from rlkit.core.buffer import FullBatch, Rollout
from rlkit.variants.base import Stateless


class FreshRollout(Stateless):
    """:class:`rlkit.variants.base.BatchSource` of plain PPO on a :class:`Rollout`."""

    name = "rollout"

    def __init__(self, gamma: float, lam: float) -> None:
        self.gamma, self.lam = gamma, lam

    def batches(self, rollout: Rollout, update: int) -> tuple[FullBatch, dict[str, float]]:
        return FullBatch(rollout.buffer.compute_batch(rollout.last_values, self.gamma, self.lam)), {}
