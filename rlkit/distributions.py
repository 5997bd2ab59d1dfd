"""Policy heads: the only way PPO touches an action distribution.

A head turns the actor's output (``params``: logits or means, ``[B, out_dim]``) into
``sample``, ``log_prob``, ``entropy`` and ``mode``. Log-probabilities and entropies are
summed over action dimensions. The math is written out (no ``torch.distributions``
objects on the hot path) and tested against ``torch.distributions``.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
from torch import nn

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class UnsupportedSpaceError(TypeError):
    """A Gymnasium space rlkit has no head (or encoder) for."""


class CategoricalHead(nn.Module):
    """Categorical over ``n`` actions (``Discrete``); params are logits ``[B, n]``."""

    discrete = True

    def __init__(self, n: int, start: int = 0) -> None:
        super().__init__()
        self.n, self.start = n, start

    @property
    def out_dim(self) -> int:
        return self.n

    def sample(self, logits: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """``[B]`` int64 actions."""
        probs = torch.softmax(logits, dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    def log_prob(self, logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``[B]`` log pi(a|s) for int actions ``[B]``."""
        logp = torch.log_softmax(logits, dim=-1)
        return logp.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self, logits: torch.Tensor) -> torch.Tensor:
        """``[B]`` entropy."""
        logp = torch.log_softmax(logits, dim=-1)
        return -(logp.exp() * logp).sum(-1)

    def log_prob_entropy(self, logits: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``log_prob`` and ``entropy`` together (the PPO loss needs both), as one autograd node."""
        return _CategoricalLogProbEntropy.apply(logits, actions.long())

    def mode(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.argmax(-1)

    def to_env(self, actions: np.ndarray) -> np.ndarray:
        return actions + self.start if self.start else actions


class _CategoricalLogProbEntropy(torch.autograd.Function):
    """``log_softmax(z)[a]`` and ``H = -sum(p log p)`` from one log-softmax, with the gradient
    written out: ``d log p_a / dz = onehot(a) - p`` and ``dH/dz = -p (log p + H)``.

    One node instead of ~8 (fewer per-op costs on small CPU batches, issue #2) that keeps only
    the log-probabilities for backward (one ``[B, V]`` tensor for a language model's vocabulary
    instead of three). Tested against autograd on ``log_prob`` and ``entropy``.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, actions: torch.Tensor):
        logp = torch.log_softmax(logits, dim=-1)
        entropy = -(logp.exp() * logp).sum(-1)
        ctx.save_for_backward(logp, actions, entropy)
        return logp.gather(-1, actions[:, None])[:, 0], entropy

    @staticmethod
    def backward(ctx, g_log_prob: torch.Tensor, g_entropy: torch.Tensor):
        logp, actions, entropy = ctx.saved_tensors
        p = logp.exp()
        # -g_H p (log p + H) - g_lp p, then + g_lp at the taken action
        grad = (logp + entropy[:, None]).mul_(g_entropy[:, None]).add_(g_log_prob[:, None]).mul_(p).neg_()
        grad.scatter_add_(-1, actions[:, None], g_log_prob[:, None])
        return grad, None


class DiagGaussianHead(nn.Module):
    """Diagonal Gaussian with a state-independent log-std (``Box``); params are means ``[B, A]``.

    Samples are stored unclipped; ``to_env`` clips them to the Box bounds (issue #2).
    """

    discrete = False

    def __init__(self, action_dim: int, low: np.ndarray, high: np.ndarray, init_log_std: float = 0.0) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.log_std = nn.Parameter(torch.full((action_dim,), float(init_log_std)))
        self.low = np.asarray(low, dtype=np.float32).reshape(-1)
        self.high = np.asarray(high, dtype=np.float32).reshape(-1)

    @property
    def out_dim(self) -> int:
        return self.action_dim

    def sample(self, mean: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        return mean + noise * self.log_std.exp()

    def log_prob(self, mean: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        z = (actions - mean) * torch.exp(-self.log_std)
        return (-0.5 * z.square() - self.log_std).sum(-1) - self.action_dim * _LOG_SQRT_2PI

    def entropy(self, mean: torch.Tensor) -> torch.Tensor:
        per_dim = self.log_std.sum() + self.action_dim * (0.5 + _LOG_SQRT_2PI)
        return per_dim.expand(mean.shape[0])

    def log_prob_entropy(self, mean: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``log_prob`` and ``entropy`` together (the PPO loss needs both)."""
        return self.log_prob(mean, actions), self.entropy(mean)

    def mode(self, mean: torch.Tensor) -> torch.Tensor:
        return mean

    def to_env(self, actions: np.ndarray) -> np.ndarray:
        """A clipped copy for the env (the stored sample stays unclipped)."""
        return np.minimum(np.maximum(actions, self.low), self.high)


PolicyHead = CategoricalHead | DiagGaussianHead


def make_head(space: gym.Space) -> PolicyHead:
    """The head for an action space; any other space is a one-line error naming it."""
    if isinstance(space, gym.spaces.Discrete):
        return CategoricalHead(int(space.n), int(space.start))
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return DiagGaussianHead(space.shape[0], space.low, space.high)
    raise UnsupportedSpaceError(
        f"unsupported action space {space}: rlkit supports Discrete and 1-D Box actions")
