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
    """``mean(max(-A * r, -A * clip(r, 1 - eps, 1 + eps)))`` over ``[B]`` ratios and advantages.

    The clipped surrogate on its own, with autograd (tests and readers); :func:`ppo_loss`
    computes the same term inside :class:`_Objective`."""
    return torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - clip_coef, 1 + clip_coef)).mean()


class _Objective(torch.autograd.Function):
    """The scalar PPO objective of :func:`ppo_loss` from ``new_log_probs [B]``, ``entropy []`` and
    ``new_values [B]``, with its gradient written out.

    Autograd would record ~25 tiny ops here and replay ~35 backward nodes; on CPU with
    minibatches of 64-128 that per-op cost was a third of a PPO step (profiled, issue #2). The
    forward below is the loss as one reads it; ``backward`` is its derivative, tested against
    autograd on the same formula in all sign/clip cases (tests/test_loss.py).
    """

    @staticmethod
    def forward(ctx, new_log_probs: torch.Tensor, entropy: torch.Tensor, new_values: torch.Tensor,
                old_log_probs: torch.Tensor, advantages: torch.Tensor, returns: torch.Tensor, old_values: torch.Tensor,
                clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float):
        log_ratio = new_log_probs - old_log_probs
        ratio = log_ratio.exp()
        # Clipped surrogate: mean(max(-A r, -A clip(r, 1 - eps, 1 + eps))).
        neg_adv = -advantages
        unclipped = neg_adv * ratio
        clipped = neg_adv * ratio.clamp(1 - clip_coef, 1 + clip_coef)
        pg_loss = torch.max(unclipped, clipped).mean()
        # Value loss, optionally the pessimistic max with a value clipped around the old one.
        v_err = new_values - returns
        v_sq = v_err.square()
        if clip_vloss:
            delta = new_values - old_values
            v_clipped_err = old_values + delta.clamp(-clip_coef, clip_coef) - returns
            v_sq_clipped = v_clipped_err.square()
            v_loss = 0.5 * torch.max(v_sq, v_sq_clipped).mean()
            # d/dV through whichever branch is the max; the clipped branch passes the gradient only
            # inside the clip range. (Inside it, old + (V - old) may round above V: that branch then
            # wins the max with the same slope up to rounding, so it must not be zeroed.)
            ctx.v_slope = torch.where(v_sq >= v_sq_clipped, v_err,
                                      v_clipped_err * (delta.abs() <= clip_coef))
        else:
            v_loss = 0.5 * v_sq.mean()
            ctx.v_slope = v_err
        loss = torch.add(pg_loss, v_loss, alpha=vf_coef).sub_(entropy, alpha=ent_coef)
        # d/dlog pi = r d/dr = -A r through the unclipped branch where it is the max. The clipped
        # branch passes a gradient only inside the clip range, where clamp returns r exactly, the
        # branches are equal and the unclipped one counts as the max.
        ctx.pg_slope = unclipped * (unclipped >= clipped)
        ctx.coefs = (ent_coef, vf_coef)
        ctx.mark_non_differentiable(pg_loss, v_loss, log_ratio)
        return loss, pg_loss, v_loss, log_ratio

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor, *_unused: torch.Tensor):
        ent_coef, vf_coef = ctx.coefs
        n = ctx.pg_slope.numel()
        # d loss / d log pi = (1/B) (-A r) on active samples (dr/dlog pi = r); value: (vf/B) (V - R).
        g_logp = ctx.pg_slope * (grad_loss / n)
        g_values = ctx.v_slope * (grad_loss * (vf_coef / n))
        return g_logp, -ent_coef * grad_loss, g_values, *([None] * 8)


def ppo_loss(head: PolicyHead, dist_params: torch.Tensor, new_values: torch.Tensor, mb: Batch, *,
             clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float, norm_adv: bool) -> LossOutput:
    """PPO loss for one minibatch given the current network outputs on ``mb.obs``.

    ``dist_params [B, out_dim]`` and ``new_values [B]`` come from the policy being trained.
    ``loss = pg_loss - ent_coef * entropy + vf_coef * v_loss`` (see :class:`_Objective`).
    """
    new_log_probs, entropy = head.log_prob_entropy(dist_params, mb.actions)
    entropy = entropy.mean()
    advantages = mb.advantages
    if norm_adv:  # per minibatch (PPO implementation detail)
        std, mean = torch.std_mean(advantages)
        advantages = (advantages - mean) / (std + 1e-8)
    loss, pg_loss, v_loss, log_ratio = _Objective.apply(
        new_log_probs, entropy, new_values, mb.log_probs, advantages, mb.returns, mb.values,
        clip_coef, clip_vloss, ent_coef, vf_coef)
    return LossOutput(loss, pg_loss, v_loss, entropy.detach(), log_ratio)
