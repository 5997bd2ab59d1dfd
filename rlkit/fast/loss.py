"""The PPO loss of :func:`rlkit.core.loss.ppo_loss` as one autograd node with its gradient
written out.

Autograd would record ~25 tiny ops for the scalar objective and replay ~35 backward nodes; on
the CPU with minibatches of 64-128 that per-op cost is a large share of a PPO step. The
forward below is the same formula; ``backward`` is its derivative. Both are tested against
the plain path (tests/fast) in all sign/clip cases, including the rounding case where
``old + (V - old) != V`` inside the value clip range.

The head says what the fused loss may do with it (:attr:`rlkit.core.heads.PolicyHead.fused_kind`):
``"categorical"`` heads get the fused log-prob/entropy node of :mod:`rlkit.fast.categorical`,
``"autograd"`` heads feed their own ``log_prob_entropy`` into the fused objective, and a head
that declares neither gets :func:`rlkit.core.loss.ppo_loss` itself.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from rlkit.core.buffer import Batch
from rlkit.core.heads import PolicyHead
from rlkit.core.loss import LossOutput, normalize_advantages, ppo_loss
from rlkit.fast.categorical import categorical_log_prob_entropy


def _mean(x: torch.Tensor, dim: int | None) -> torch.Tensor:
    return x.mean() if dim is None else x.mean(dim)


class Objective(NamedTuple):
    """The objective's terms, and its per-sample slopes (what the gradient needs)."""

    loss: torch.Tensor
    pg_loss: torch.Tensor
    v_loss: torch.Tensor
    log_ratio: torch.Tensor
    pg_slope: torch.Tensor
    """``d pg_loss / d log pi`` per sample before the ``1/B``."""
    v_slope: torch.Tensor
    """``d v_loss / d V`` per sample before the ``vf_coef / B``."""


def objective(new_log_probs: torch.Tensor, entropy: torch.Tensor, new_values: torch.Tensor,
              old_log_probs: torch.Tensor, advantages: torch.Tensor, returns: torch.Tensor, old_values: torch.Tensor,
              clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float, vloss_form: str,
              dim: int | None = None) -> Objective:
    """``loss, pg_loss, v_loss`` (scalars, or ``[K]`` with ``dim``: each ``[K, B]`` row's own) and
    ``log_ratio [B]`` from ``new_log_probs [B]``, ``entropy []`` (the mean) and ``new_values [B]``;
    the rest are constants of the minibatch."""
    log_ratio = new_log_probs - old_log_probs
    ratio = log_ratio.exp()
    # Clipped surrogate: mean(max(-A r, -A clip(r, 1 - eps, 1 + eps))).
    neg_adv = -advantages
    unclipped = neg_adv * ratio
    clipped = neg_adv * ratio.clamp(1 - clip_coef, 1 + clip_coef)
    pg_loss = _mean(torch.max(unclipped, clipped), dim)
    # Value loss, optionally the pessimistic max with a value clipped around the old one.
    v_err = new_values - returns
    if vloss_form == "clipped-mse":  # mean((V_clip - R)^2): d/dV = 2 (V_clip - R) inside the clip range
        v_loss, v_slope = _clipped_mse(new_values, old_values, returns, v_err, clip_coef, clip_vloss, dim)
    elif clip_vloss:
        v_sq = v_err.square()
        delta = new_values - old_values
        v_clipped_err = old_values + delta.clamp(-clip_coef, clip_coef) - returns
        v_sq_clipped = v_clipped_err.square()
        v_loss = 0.5 * _mean(torch.max(v_sq, v_sq_clipped), dim)
        # d/dV through whichever branch is the max; the clipped branch passes the gradient only
        # inside the clip range. (Inside it, old + (V - old) may round above V: that branch then
        # wins the max with the same slope up to rounding, so it must not be zeroed.)
        v_slope = torch.where(v_sq >= v_sq_clipped, v_err, v_clipped_err * (delta.abs() <= clip_coef))
    else:
        v_loss = 0.5 * _mean(v_err.square(), dim)
        v_slope = v_err
    loss = torch.add(pg_loss, v_loss, alpha=vf_coef).sub_(entropy, alpha=ent_coef)
    # d/dlog pi = r d/dr = -A r through the unclipped branch where it is the max. The clipped
    # branch passes a gradient only inside the clip range, where clamp returns r exactly, the
    # branches are equal and the unclipped one counts as the max.
    pg_slope = unclipped * (unclipped >= clipped)
    return Objective(loss, pg_loss, v_loss, log_ratio, pg_slope, v_slope)


class ObjectiveGrads(NamedTuple):
    log_probs: torch.Tensor
    """``[B]`` (``[K, B]``)."""
    entropy: torch.Tensor
    """Of the mean entropy: ``[]`` (``[K]``)."""
    values: torch.Tensor
    """``[B]`` (``[K, B]``)."""


def objective_grads(pg_slope: torch.Tensor, v_slope: torch.Tensor, grad_loss: torch.Tensor, ent_coef: float,
                    vf_coef: float, dim: int | None = None) -> ObjectiveGrads:
    """The gradients of :func:`objective`'s inputs for the gradient ``grad_loss`` of its loss, from
    its ``pg_slope`` and ``v_slope``."""
    n = pg_slope.numel() if dim is None else pg_slope.shape[dim]
    g = grad_loss if dim is None else grad_loss.unsqueeze(dim)
    # d loss / d log pi = (1/B) (-A r) on active samples (dr/dlog pi = r); value: (vf/B) (V - R).
    return ObjectiveGrads(pg_slope * (g / n), -ent_coef * grad_loss, v_slope * (g * (vf_coef / n)))


class _Objective(torch.autograd.Function):
    """:func:`objective` with :func:`objective_grads` as its backward."""

    @staticmethod
    def forward(ctx, new_log_probs: torch.Tensor, entropy: torch.Tensor, new_values: torch.Tensor,
                old_log_probs: torch.Tensor, advantages: torch.Tensor, returns: torch.Tensor, old_values: torch.Tensor,
                clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float, vloss_form: str,
                dim: int | None = None):
        obj = objective(new_log_probs, entropy, new_values, old_log_probs, advantages, returns, old_values,
                        clip_coef, clip_vloss, ent_coef, vf_coef, vloss_form, dim)
        ctx.slopes, ctx.coefs, ctx.dim = (obj.pg_slope, obj.v_slope), (ent_coef, vf_coef), dim
        ctx.mark_non_differentiable(obj.pg_loss, obj.v_loss, obj.log_ratio)
        return obj.loss, obj.pg_loss, obj.v_loss, obj.log_ratio

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor, *_unused: torch.Tensor):
        grads = objective_grads(*ctx.slopes, grad_loss, *ctx.coefs, dim=ctx.dim)
        return grads.log_probs, grads.entropy, grads.values, *([None] * 10)


def _clipped_mse(new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, v_err: torch.Tensor,
                 clip_coef: float, clip_vloss: bool, dim: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Stable-Baselines3's value loss and its slope per sample (before the 1/B): ``mean(e^2)``
    with ``e`` the error of the clipped prediction (of V itself without clipping), slope ``2 e``,
    zero outside the clip range."""
    if not clip_vloss:
        return _mean(v_err.square(), dim), 2 * v_err
    delta = new_values - old_values
    err = old_values + delta.clamp(-clip_coef, clip_coef) - returns
    return _mean(err.square(), dim), 2 * err * (delta.abs() <= clip_coef)


def fused_ppo_loss(head: PolicyHead, dist_params: torch.Tensor, new_values: torch.Tensor, mb: Batch, *,
                   clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float,
                   norm_adv: bool, vloss_form: str = "max") -> LossOutput:
    """Same arguments and result as :func:`rlkit.core.loss.ppo_loss`, fewer autograd nodes; the
    plain loss itself for a head whose ``fused_kind`` is neither ``"categorical"`` nor ``"autograd"``."""
    kind = head.fused_kind
    if kind == "categorical":
        new_log_probs, entropy = categorical_log_prob_entropy(dist_params, mb.actions)
    elif kind == "autograd":
        new_log_probs, entropy = head.log_prob_entropy(dist_params, mb.actions)
    else:
        return ppo_loss(head, dist_params, new_values, mb, clip_coef=clip_coef, clip_vloss=clip_vloss,
                        ent_coef=ent_coef, vf_coef=vf_coef, norm_adv=norm_adv, vloss_form=vloss_form)
    return fused_loss_terms(new_log_probs, entropy, new_values, mb, clip_coef=clip_coef, clip_vloss=clip_vloss,
                            ent_coef=ent_coef, vf_coef=vf_coef, norm_adv=norm_adv, vloss_form=vloss_form)


def fused_loss_terms(new_log_probs: torch.Tensor, entropy: torch.Tensor, new_values: torch.Tensor, mb: Batch, *,
                     clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float, norm_adv: bool,
                     vloss_form: str = "max", dim: int | None = None) -> LossOutput:
    """Same arguments and result as :func:`rlkit.core.loss.ppo_loss_terms` (``[B]`` inputs and
    scalar terms, or with ``dim`` each ``[K, B]`` row's own terms ``[K]``), as one autograd node."""
    entropy = _mean(entropy, dim)
    advantages = normalize_advantages(mb.advantages, dim) if norm_adv else mb.advantages
    loss, pg_loss, v_loss, log_ratio = _Objective.apply(
        new_log_probs, entropy, new_values, mb.log_probs, advantages, mb.returns, mb.values,
        clip_coef, clip_vloss, ent_coef, vf_coef, vloss_form, dim)
    return LossOutput(loss, pg_loss, v_loss, entropy.detach(), log_ratio)
