"""The PPO update, shared by every trainer (Gymnasium and token-level LLM envs).

Epochs of minibatch steps: forward, loss (the run's objective, :mod:`rlkit.core.objective`; the
default one by :func:`rlkit.core.loss.ppo_loss` or the fused kernel with the same numbers),
backward, global grad-norm clip, Adam step; optional early stop on the epoch's approx_kl. What a
minibatch is (transitions for MLP policies, whole sequences for language models) and how the
network is run on it are the caller's: ``epoch_minibatches()`` yields minibatches and ``forward(mb)`` returns the
distribution parameters, values and the :class:`Batch` of targets for its transitions.
"""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

import torch

from rlkit.core.buffer import Batch
from rlkit.core.config import PPOConfig
from rlkit.core.heads import PolicyHead
from rlkit.core.loss import LossFn, ppo_loss, ratio_stats
from rlkit.core.objective import CLIPPED_SURROGATE, Objective, ObjectiveTerms, mean_stats, minibatch_loss
from rlkit.core.optim import FlatParameters, Optimizer
from rlkit.errors import NonFiniteError

MB = TypeVar("MB")


def ppo_epochs(epoch_minibatches: Callable[[], Iterable[MB]],
               forward: Callable[[MB], tuple[torch.Tensor, torch.Tensor, Batch]], head: PolicyHead,
               flat: FlatParameters, optimizer: Optimizer, hp: PPOConfig,
               update_number: int, loss_fn: LossFn = ppo_loss,
               objective: Objective = CLIPPED_SURROGATE) -> dict[str, float]:
    """Run the epochs; returns mean ``losses/`` statistics (approx_kl, clipfrac and the objective's
    own statistics of the last epoch). ``loss_fn`` computes the default objective (the plain
    formula or a fused kernel); any other ``objective`` is called on each minibatch instead."""
    loss = minibatch_loss(objective, head, hp, loss_fn)
    losses: list[torch.Tensor] = []
    epochs = 0
    for _ in range(hp.update_epochs):
        log_ratios, extra = [], []
        for mb in epoch_minibatches():
            dist_params, values, targets = forward(mb)
            out = loss(dist_params, values, targets)
            flat.zero_grad()
            out.loss.backward()
            grad_norm = flat.clip_grad_norm_(hp.max_grad_norm)
            optimizer.step()
            losses += [out.loss.detach(), out.pg_loss, out.v_loss, out.entropy, grad_norm]
            log_ratios.append(out.log_ratio)
            if isinstance(out, ObjectiveTerms) and out.stats:
                extra.append(out.stats)
        epochs += 1
        kl = ratio_stats(torch.cat(log_ratios), hp.clip_coef)
        if hp.target_kl is not None and kl.approx_kl.item() > hp.target_kl:
            break  # early stop on the epoch's approx_kl (over all its minibatches)
    return loss_scalars(torch.stack(losses).view(-1, 5), kl.approx_kl, kl.clipfrac, epochs, update_number,
                        mean_stats(extra))


def loss_scalars(steps: torch.Tensor, approx_kl: torch.Tensor, clipfrac: torch.Tensor, epochs: int,
                 update_number: int, extra: dict[str, torch.Tensor] | None = None) -> dict[str, float]:
    """The ``losses/`` scalars of an update from ``steps [S, 5]`` (loss, policy loss, value loss,
    entropy and grad norm of each minibatch step; averaged), the last epoch's approx_kl and
    clipfrac, and ``extra``, the objective's own statistics of the last epoch (``losses/<key>``);
    a non-finite mean is a :class:`NonFiniteError`."""
    mean = steps.mean(0).float().cpu()
    if not torch.isfinite(mean).all():
        raise NonFiniteError(f"non-finite loss during update {update_number}")
    names = ("loss", "policy_loss", "value_loss", "entropy", "grad_norm")
    stats = {f"losses/{k}": float(v) for k, v in zip(names, mean)}
    stats["losses/approx_kl"], stats["losses/clipfrac"] = float(approx_kl), float(clipfrac)
    stats["losses/epochs"] = float(epochs)
    stats.update({f"losses/{k}": float(v) for k, v in (extra or {}).items()})
    return stats


def explained_variance(returns: torch.Tensor, values: torch.Tensor) -> float:
    """``1 - Var(returns - values) / Var(returns)`` (NaN when the returns are constant)."""
    var_y = returns.var()
    return float(1 - (returns - values).var() / var_y) if var_y > 0 else float("nan")
