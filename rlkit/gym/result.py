"""What a finished Gymnasium run returns (``rlkit.train``) and writes as ``result.json``."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from rlkit.gym.agent import Agent


@dataclass
class TrainResult:
    """What ``rlkit.train`` returns (and ``rlkit train`` prints as one JSON line)."""

    env: str
    seed: int
    total_steps: int
    steps_per_second: float
    eval_return_mean: float
    eval_return_std: float
    run_dir: str
    variant: str
    updates: int
    eval_history: list[tuple[int, float, float]] = field(default_factory=list)
    """``(env steps, return mean, return std)`` of every evaluation (``--eval-every``, and the final one)."""
    eval_seconds: list[float] = field(default_factory=list)
    """Training seconds (rollouts and updates, not evaluation) before each evaluation of ``eval_history``."""
    agent: Agent | None = field(default=None, repr=False, compare=False)
    train_return_last100: float = float("nan")
    """Mean return of the last 100 training episodes (NaN before any): the PPO paper's score."""

    def to_json(self) -> dict[str, object]:
        """The result as JSON values (a NaN return, e.g. with no evaluation, becomes null)."""
        out = {k: v for k, v in asdict(self).items() if k != "agent"}
        return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in out.items()}

    def act(self, obs: np.ndarray) -> np.ndarray:
        assert self.agent is not None
        return self.agent.act(obs)
