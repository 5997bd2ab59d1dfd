"""The KL penalty against the frozen reference, and its adaptive coefficient."""

from __future__ import annotations

import torch


def kl_penalty(log_probs: torch.Tensor, ref_log_probs: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token KL(pi || ref) estimate from samples of pi: ``k1 = log pi - log ref`` or
    ``k3 = (r - 1) - log r`` with ``r = ref / pi`` (non-negative, lower variance)."""
    log_ratio = ref_log_probs - log_probs
    if estimator == "k1":
        return -log_ratio
    if estimator == "k3":
        return log_ratio.exp() - 1 - log_ratio
    raise ValueError(f"unknown KL estimator {estimator!r} (k1 or k3)")


class AdaptiveKL:
    """beta controller of Ziegler et al. (2019): ``beta *= 1 + clip(KL / target - 1, -0.2, 0.2) * n / horizon``."""

    def __init__(self, beta: float, target: float | None, horizon: int) -> None:
        self.beta, self.target, self.horizon = beta, target, horizon

    def update(self, kl: float, n_steps: int) -> None:
        if self.target is None:
            return
        error = min(max(kl / self.target - 1.0, -0.2), 0.2)
        self.beta *= 1.0 + error * n_steps / self.horizon
