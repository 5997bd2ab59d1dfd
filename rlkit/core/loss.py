"""The PPO loss (Schulman et al. 2017, eq. 9) written as the formula, with autograd.

For one minibatch of ``B`` transitions, with ``r = pi(a|s) / pi_behaviour(a|s)``:

- clipped surrogate: ``L_clip = mean(max(-A r, -A clip(r, 1 - eps, 1 + eps)))``
- value loss: ``L_v = 0.5 mean((V - R)^2)``, or with value clipping (the PPO implementations'
  detail, Huang et al. 2022) ``0.5 mean(max((V - R)^2, (V_clip - R)^2))`` with
  ``V_clip = V_old + clip(V - V_old, -eps, eps)``. Stable-Baselines3's form (``vloss_form=
  "clipped-mse"``) is ``mean((V_clip - R)^2)``: the clipped prediction alone, without the 0.5.
- entropy bonus: ``H = mean(entropy)``
- ``loss = L_clip - ent_coef * H + vf_coef * L_v``

This is the primary path (language models use it). :func:`rlkit.fast.loss.fused_ppo_loss`
computes the same numbers with its gradient written out, for small CPU minibatches where
per-op cost dominates; the two are tested equal.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import torch

from rlkit.core.buffer import Batch
from rlkit.core.config import PPOConfig
from rlkit.core.heads import PolicyHead


class LossOutput(NamedTuple):
    loss: torch.Tensor
    """Scalar to minimize: pg_loss - ent_coef * entropy + vf_coef * v_loss."""
    pg_loss: torch.Tensor
    v_loss: torch.Tensor
    entropy: torch.Tensor
    log_ratio: torch.Tensor
    """``[B]`` log(pi_new / pi_behaviour), detached: feed :func:`ratio_stats` (once per epoch,
    not per minibatch, to keep the hot loop short)."""


class LossFn(Protocol):
    """The signature both loss implementations share."""

    def __call__(self, head: PolicyHead, dist_params: torch.Tensor, new_values: torch.Tensor, mb: Batch, *,
                 clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float,
                 norm_adv: bool, vloss_form: str = "max") -> LossOutput: ...


class LossTargets(Protocol):
    """What the PPO loss reads of a minibatch besides the policy's outputs (a :class:`Batch` is
    one): the behaviour log-probs, raw advantages, value targets and old values, all ``[B]``."""

    @property
    def log_probs(self) -> torch.Tensor: ...

    @property
    def advantages(self) -> torch.Tensor: ...

    @property
    def returns(self) -> torch.Tensor: ...

    @property
    def values(self) -> torch.Tensor: ...


class RatioStats(NamedTuple):
    approx_kl: torch.Tensor
    """k3 estimator of KL(old || new), ``mean((r - 1) - log r)``."""
    clipfrac: torch.Tensor
    """Fraction of samples with ``|r - 1| > clip_coef``."""


@torch.no_grad()
def ratio_stats(log_ratio: torch.Tensor, clip_coef: float, dim: int | None = None) -> RatioStats:
    """Scalars of ``log_ratio [B]``, or with ``dim`` the statistics over that axis only (``[K, B]``
    -> ``[K]``: each row its own, for ``K`` models trained side by side)."""
    ratio = log_ratio.exp()
    return RatioStats(_mean((ratio - 1) - log_ratio, dim), _mean(((ratio - 1).abs() > clip_coef).float(), dim))


def _mean(x: torch.Tensor, dim: int | None) -> torch.Tensor:
    return x.mean() if dim is None else x.mean(dim)


def clipped_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, clip_coef: float,
                      dim: int | None = None) -> torch.Tensor:
    """``mean(max(-A * r, -A * clip(r, 1 - eps, 1 + eps)))`` over ``[B]`` ratios and advantages (or
    over ``dim`` only: per row of ``[K, B]``)."""
    return _mean(torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - clip_coef, 1 + clip_coef)), dim)


def value_loss(new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip_coef: float,
               clip_vloss: bool, form: str = "max", dim: int | None = None) -> torch.Tensor:
    """``form="max"``: ``0.5 mean((V - R)^2)``, or the pessimistic max with V clipped to
    ``V_old +- clip_coef``; ``form="clipped-mse"``: ``mean((V - R)^2)``, or with clipping
    ``mean((V_clip - R)^2)`` alone (Stable-Baselines3). All ``[B]`` (means over ``dim`` only if given)."""
    clipped = old_values + (new_values - old_values).clamp(-clip_coef, clip_coef) if clip_vloss else None
    if form == "clipped-mse":
        prediction = new_values if clipped is None else clipped
        return _mean((prediction - returns).square(), dim)
    v_sq = (new_values - returns).square()
    if clipped is None:
        return 0.5 * _mean(v_sq, dim)
    return 0.5 * _mean(torch.max(v_sq, (clipped - returns).square()), dim)


def normalize_advantages(advantages: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """``(A - mean) / (std + 1e-8)`` over the minibatch (a PPO implementation detail), or over ``dim``.
    A minibatch of one value (HP3O's paper sampling of short episodes, an RLHF response of one
    token) has no standard deviation; its advantage is 0, the value of ``A - mean``."""
    if (advantages.numel() if dim is None else advantages.shape[dim]) < 2:
        return torch.zeros_like(advantages)
    std, mean = torch.std_mean(advantages) if dim is None else torch.std_mean(advantages, dim, keepdim=True)
    return (advantages - mean) / (std + 1e-8)


def ppo_loss(head: PolicyHead, dist_params: torch.Tensor, new_values: torch.Tensor, mb: Batch, *,
             clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float, norm_adv: bool,
             vloss_form: str = "max") -> LossOutput:
    """PPO loss for one minibatch given the current network outputs on ``mb.obs``.

    ``dist_params [B, out_dim]`` and ``new_values [B]`` come from the policy being trained;
    ``mb`` holds the behaviour log-probs, advantages, returns and old values ``[B]``.
    """
    new_log_probs, entropy = head.log_prob_entropy(dist_params, mb.actions)
    return ppo_loss_terms(new_log_probs, entropy, new_values, mb, clip_coef=clip_coef, clip_vloss=clip_vloss,
                          ent_coef=ent_coef, vf_coef=vf_coef, norm_adv=norm_adv, vloss_form=vloss_form)


def ppo_loss_terms(new_log_probs: torch.Tensor, entropy: torch.Tensor, new_values: torch.Tensor, mb: LossTargets, *,
                   clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float, norm_adv: bool,
                   vloss_form: str = "max", dim: int | None = None) -> LossOutput:
    """The PPO loss from the policy's log-probs and entropies of ``mb.actions``: ``[B]`` inputs and
    scalar terms, or with ``dim`` the means over that axis only (``[K, B]`` -> ``[K]``: ``K``
    models' minibatches side by side, each row its own loss)."""
    advantages = normalize_advantages(mb.advantages, dim) if norm_adv else mb.advantages
    log_ratio = new_log_probs - mb.log_probs
    pg_loss = clipped_surrogate(log_ratio.exp(), advantages, clip_coef, dim)
    return policy_loss_terms(pg_loss, log_ratio, entropy, new_values, mb, clip_coef=clip_coef, clip_vloss=clip_vloss,
                             ent_coef=ent_coef, vf_coef=vf_coef, vloss_form=vloss_form, dim=dim)


def policy_loss_terms(pg_loss: torch.Tensor, log_ratio: torch.Tensor, entropy: torch.Tensor, new_values: torch.Tensor,
                      mb: LossTargets, *, clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float,
                      vloss_form: str = "max", dim: int | None = None) -> LossOutput:
    """PPO's loss around a policy loss ``pg_loss`` (scalar, or ``[K]`` with ``dim``): the value loss
    (:func:`value_loss`, clipped to ``clip_coef`` when ``clip_vloss``) and the entropy bonus of the
    per-sample ``entropy``, ``loss = pg_loss - ent_coef * H + vf_coef * L_v``; ``log_ratio`` is
    passed through (detached) for the ratio statistics."""
    v_loss = value_loss(new_values, mb.values, mb.returns, clip_coef, clip_vloss, vloss_form, dim)
    entropy = _mean(entropy, dim)
    loss = pg_loss - ent_coef * entropy + vf_coef * v_loss
    return LossOutput(loss, pg_loss.detach(), v_loss.detach(), entropy.detach(), log_ratio.detach())


def loss_coefficients(hp: PPOConfig) -> dict[str, Any]:
    """The keyword arguments :data:`LossFn` takes, from a :class:`PPOConfig`."""
    return dict(clip_coef=hp.clip_coef, clip_vloss=hp.clip_vloss, ent_coef=hp.ent_coef, vf_coef=hp.vf_coef,
                norm_adv=hp.norm_adv, vloss_form=hp.vloss_form)
