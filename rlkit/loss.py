"""The PPO loss (Schulman et al. 2017): clipped surrogate, (clipped) value loss, entropy."""

from __future__ import annotations

from typing import NamedTuple

import torch

from rlkit.buffer import Batch
from rlkit.distributions import PolicyHead


class LossOutput(NamedTuple):
    loss: torch.Tensor
    """Scalar to minimize: pg_loss - ent_coef * entropy + vf_coef * v_loss."""
    pg_loss: torch.Tensor
    v_loss: torch.Tensor
    entropy: torch.Tensor
    log_ratio: torch.Tensor
    """``[B]`` log(pi_new / pi_behaviour), detached: feed :func:`ratio_stats` (once per epoch,
    not per minibatch, to keep the hot loop short)."""


class RatioStats(NamedTuple):
    approx_kl: torch.Tensor
    """k3 estimator of KL(old || new), ``mean((r - 1) - log r)``."""
    clipfrac: torch.Tensor
    """Fraction of samples with ``|r - 1| > clip_coef``."""


@torch.no_grad()
def ratio_stats(log_ratio: torch.Tensor, clip_coef: float) -> RatioStats:
    ratio = log_ratio.exp()
    return RatioStats(((ratio - 1) - log_ratio).mean(), ((ratio - 1).abs() > clip_coef).float().mean())


def clipped_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, clip_coef: float) -> torch.Tensor:
    """``mean(max(-A * r, -A * clip(r, 1 - eps, 1 + eps)))`` over ``[B]`` ratios and advantages."""
    return torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - clip_coef, 1 + clip_coef)).mean()


def ppo_loss(head: PolicyHead, dist_params: torch.Tensor, new_values: torch.Tensor, mb: Batch, *,
             clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float, norm_adv: bool) -> LossOutput:
    """PPO loss for one minibatch given the current network outputs on ``mb.obs``.

    ``dist_params [B, out_dim]`` and ``new_values [B]`` come from the policy being trained.
    """
    new_log_probs = head.log_prob(dist_params, mb.actions)
    log_ratio = new_log_probs - mb.log_probs
    ratio = log_ratio.exp()

    advantages = mb.advantages
    if norm_adv:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    pg_loss = clipped_surrogate(ratio, advantages, clip_coef)

    if clip_vloss:
        v_clipped = mb.values + (new_values - mb.values).clamp(-clip_coef, clip_coef)
        v_loss = 0.5 * torch.max((new_values - mb.returns).square(), (v_clipped - mb.returns).square()).mean()
    else:
        v_loss = 0.5 * (new_values - mb.returns).square().mean()

    entropy = head.entropy(dist_params).mean()
    loss = pg_loss - ent_coef * entropy + vf_coef * v_loss
    return LossOutput(loss, pg_loss.detach(), v_loss.detach(), entropy.detach(), log_ratio.detach())
