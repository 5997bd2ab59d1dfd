"""Heads for factored discrete actions: ``MultiDiscrete`` (independent categoricals, one per
dimension) and ``MultiBinary`` (independent Bernoullis). Log-probabilities and entropies sum over
the dimensions, as for the Gaussian head (the factored policies of Stable-Baselines3 and CleanRL).
Spaces of any shape are flattened to ``[B, D]`` actions and reshaped for the env. Tested against
``torch.distributions``.
"""

from __future__ import annotations

from typing import ClassVar

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlkit.core.heads import FusedKind, NumpySample, NumpySampler, NumpyCategorical, register_head


class MultiCategoricalHead(nn.Module):
    """One categorical per dimension of a ``MultiDiscrete(nvec, start)``; params are the
    dimensions' logits side by side ``[B, sum(nvec)]``; actions ``[B, D]`` int64."""

    fused_kind: ClassVar[FusedKind | None] = "autograd"
    action_dtype = torch.int64

    def __init__(self, nvec: np.ndarray, start: np.ndarray) -> None:
        super().__init__()
        self.shape = tuple(nvec.shape)
        self.nvec = [int(k) for k in nvec.reshape(-1)]
        self.start = np.asarray(start, np.int64).reshape(-1)
        self.action_shape = (len(self.nvec),)

    @property
    def out_dim(self) -> int:
        return sum(self.nvec)

    def _log_softmaxes(self, logits: torch.Tensor) -> list[torch.Tensor]:
        return [torch.log_softmax(part, dim=-1) for part in logits.split(self.nvec, dim=-1)]

    def sample(self, logits: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return torch.stack([torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
                            for logp in self._log_softmaxes(logits)], dim=-1)

    def log_prob(self, logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.log_prob_entropy(logits, actions)[0]

    def entropy(self, logits: torch.Tensor) -> torch.Tensor:
        return sum((-(logp.exp() * logp).sum(-1) for logp in self._log_softmaxes(logits)),
                   torch.zeros(logits.shape[0], dtype=logits.dtype, device=logits.device))

    def log_prob_entropy(self, logits: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``[B]`` summed log-prob of ``actions [B, D]`` and ``[B]`` summed entropy."""
        logps = self._log_softmaxes(logits)
        taken = torch.stack([logp.gather(-1, actions[:, d:d + 1].long()).squeeze(-1) for d, logp in enumerate(logps)])
        entropy = torch.stack([-(logp.exp() * logp).sum(-1) for logp in logps])
        return taken.sum(0), entropy.sum(0)

    def mode(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.stack([part.argmax(-1) for part in logits.split(self.nvec, dim=-1)], dim=-1)

    def to_env(self, actions: np.ndarray) -> np.ndarray:
        """``[B, *shape]`` (or ``[*shape]`` for one action) with the space's ``start`` added."""
        out = np.asarray(actions) + self.start
        return out.reshape(*out.shape[:-1], *self.shape)

    def numpy_sampler(self) -> NumpySampler:
        return _NumpyMultiCategorical(self.nvec)


class _NumpyMultiCategorical:
    def __init__(self, nvec: list[int]) -> None:
        self.bounds = np.cumsum([0, *nvec])
        self.parts = [NumpyCategorical() for _ in nvec]

    def sample(self, out: np.ndarray, rng: np.random.Generator) -> NumpySample:
        samples = [p.sample(out[:, lo:hi], rng) for p, lo, hi in zip(self.parts, self.bounds[:-1], self.bounds[1:])]
        return NumpySample(np.stack([s.actions for s in samples], axis=-1), sum(s.log_probs for s in samples))

    def mode(self, out: np.ndarray) -> np.ndarray:
        return np.stack([out[:, lo:hi].argmax(-1) for lo, hi in zip(self.bounds[:-1], self.bounds[1:])], axis=-1)


class BernoulliHead(nn.Module):
    """Independent Bernoullis for a ``MultiBinary`` space; params are logits ``[B, D]``; actions
    ``[B, D]`` float32 0/1 (int8 for the env)."""

    fused_kind: ClassVar[FusedKind | None] = "autograd"
    action_dtype = torch.float32

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.shape = tuple(shape)
        self.action_shape = (int(np.prod(shape)),)

    @property
    def out_dim(self) -> int:
        return self.action_shape[0]

    def sample(self, logits: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=logits.dtype)
        return (u < torch.sigmoid(logits)).to(logits.dtype)

    def log_prob(self, logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return (actions * F.logsigmoid(logits) + (1 - actions) * F.logsigmoid(-logits)).sum(-1)

    def entropy(self, logits: torch.Tensor) -> torch.Tensor:
        p = torch.sigmoid(logits)
        return -(p * F.logsigmoid(logits) + (1 - p) * F.logsigmoid(-logits)).sum(-1)

    def log_prob_entropy(self, logits: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.log_prob(logits, actions), self.entropy(logits)

    def mode(self, logits: torch.Tensor) -> torch.Tensor:
        return (logits > 0).to(logits.dtype)

    def to_env(self, actions: np.ndarray) -> np.ndarray:
        out = np.asarray(actions).astype(np.int8)
        return out.reshape(*out.shape[:-1], *self.shape)

    def numpy_sampler(self) -> NumpySampler:
        return _NumpyBernoulli()


class _NumpyBernoulli:
    def sample(self, out: np.ndarray, rng: np.random.Generator) -> NumpySample:
        u = rng.random(out.shape, dtype=np.float32)
        actions = (u < 1.0 / (1.0 + np.exp(-out))).astype(np.float32)
        log_probs = -(np.logaddexp(0.0, -out) * actions + np.logaddexp(0.0, out) * (1.0 - actions)).sum(-1)
        return NumpySample(actions, log_probs.astype(np.float32, copy=False))

    def mode(self, out: np.ndarray) -> np.ndarray:
        return (out > 0).astype(np.float32)


register_head(gym.spaces.MultiDiscrete, lambda space: MultiCategoricalHead(space.nvec, space.start))
register_head(gym.spaces.MultiBinary, lambda space: BernoulliHead(tuple(space.shape)))
