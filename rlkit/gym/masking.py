"""Invalid-action masking for ``Discrete`` actions (Huang & Ontañón 2022, "A Closer Look at
Invalid Action Masking in Policy Gradient Algorithms"): the logits of invalid actions are replaced
by a large negative number before sampling, in the log-probabilities of the loss and in the
entropy, so an invalid action is never taken and gets no gradient.

An env gives its mask as sb3-contrib's MaskablePPO reads it: a method ``action_masks()`` on the
env, or ``info["action_mask"]`` from ``reset`` and ``step`` (``[A]`` booleans, True = allowed).
The mask travels with the observation: the trainer appends it to the encoded observation as ``A``
0/1 columns, so the rollout buffer, minibatches and every batch source carry it without knowing
of it, and :class:`MaskedActorCritic` splits it off again.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from rlkit.gym.action_masks import check_mask, env_mask, has_action_masks
from rlkit.gym.policies import ActResult

MASKED_LOGIT = -1e8
"""The logit of an invalid action: exp of it underflows to 0 next to any valid logit, and it stays
finite, so ``p * log p`` is 0 (not NaN) in the entropy."""


class MaskedActorCritic(nn.Module):
    """A policy whose observations end with ``n_actions`` mask columns: ``inner`` reads the rest,
    and the logits of masked actions become :data:`MASKED_LOGIT` (forward ``obs [B, dim + A]`` ->
    (logits ``[B, A]``, values ``[B]``))."""

    def __init__(self, inner: nn.Module, n_actions: int) -> None:
        super().__init__()
        self.inner, self.n = inner, n_actions
        self.head = inner.head
        self.obs_dim = inner.obs_dim + n_actions
        self.forward_override = None
        """Unused: no fused kernel replaces a masked policy."""

    def actor_parameters(self) -> list[nn.Parameter]:
        return self.inner.actor_parameters()

    def critic_parameters(self) -> list[nn.Parameter]:
        return self.inner.critic_parameters()

    def ordered_parameters(self) -> list[nn.Parameter]:
        return self.inner.ordered_parameters()

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, values = self.inner(obs[:, :-self.n])
        return logits.masked_fill(obs[:, -self.n:] < 0.5, MASKED_LOGIT), values

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.inner.value(obs[:, :-self.n])

    def snapshot(self) -> "MaskedActor":
        return MaskedActor(self.inner.snapshot(), self.n)


class MaskedActor:
    """Acting with a masked policy (the interface of :class:`rlkit.gym.policies.NumpyActor`)."""

    def __init__(self, inner: Any, n_actions: int) -> None:
        self.inner, self.n = inner, n_actions

    def _logits(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mask = obs[:, -self.n:] >= 0.5
        return np.where(mask, self.inner.params(obs[:, :-self.n]), np.float32(MASKED_LOGIT)), mask

    def value(self, obs: np.ndarray) -> np.ndarray:
        return self.inner.value(obs[:, :-self.n])

    def mode(self, obs: np.ndarray) -> np.ndarray:
        return self._logits(obs)[0].argmax(-1)

    def act(self, obs: np.ndarray, rng: np.random.Generator, with_values: bool = True) -> ActResult:
        logits, mask = self._logits(obs)
        actions, _ = self.inner.sampler.sample(logits, rng)
        last_valid = self.n - 1 - mask[:, ::-1].argmax(-1)  # float rounding at the top of the CDF
        actions = np.minimum(actions, last_valid)
        z = logits - logits.max(-1, keepdims=True)
        log_probs = z[np.arange(len(z)), actions] - np.log(np.exp(z).sum(-1))
        return ActResult(actions, log_probs.astype(np.float32), self.value(obs) if with_values else None)


__all__ = ["MASKED_LOGIT", "MaskedActor", "MaskedActorCritic", "check_mask", "env_mask", "has_action_masks"]
