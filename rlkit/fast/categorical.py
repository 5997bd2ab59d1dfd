"""Categorical log-prob and entropy as one autograd node (the fast path of
:meth:`rlkit.core.heads.CategoricalHead.log_prob_entropy`), its forward and gradient also public
as pure functions (the autograd-free stacked step, :mod:`rlkit.fast.stacked_step`, calls the
same ones, so both give the same bits)."""

from __future__ import annotations

from typing import NamedTuple

import torch


class CategoricalTerms(NamedTuple):
    log_prob: torch.Tensor
    """``[..., B]`` log pi(a|s) of the taken actions."""
    entropy: torch.Tensor
    """``[..., B]``."""
    logp: torch.Tensor
    """``[..., B, n]`` every action's log-probability (what the gradient needs)."""


def categorical_terms(logits: torch.Tensor, actions: torch.Tensor) -> CategoricalTerms:
    """Log-probs of int ``actions [..., B]`` and entropies from ``logits [..., B, n]``, from one
    log-softmax."""
    logp = torch.log_softmax(logits, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return CategoricalTerms(logp.gather(-1, actions[..., None])[..., 0], entropy, logp)


def categorical_grad(terms: CategoricalTerms, actions: torch.Tensor, g_log_prob: torch.Tensor,
                     g_entropy: torch.Tensor) -> torch.Tensor:
    """``[..., B, n]`` gradient of the logits for the gradients ``[..., B]`` of the log-probs and
    entropies: ``d log p_a / dz = onehot(a) - p`` and ``dH/dz = -p (log p + H)``."""
    logp = terms.logp
    p = logp.exp()
    # -g_H p (log p + H) - g_lp p, then + g_lp at the taken action
    grad = (logp + terms.entropy[..., None]).mul_(g_entropy[..., None]).add_(g_log_prob[..., None]).mul_(p).neg_()
    grad.scatter_add_(-1, actions[..., None], g_log_prob[..., None])
    return grad


class _CategoricalLogProbEntropy(torch.autograd.Function):
    """:func:`categorical_terms` with :func:`categorical_grad` as its backward.

    One node instead of ~8 (fewer per-op costs on small CPU batches) that keeps only the
    log-probabilities for backward (one ``[B, V]`` tensor for a language model's vocabulary
    instead of three). Tested against the plain head.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, actions: torch.Tensor):
        terms = categorical_terms(logits, actions)
        ctx.save_for_backward(terms.logp, actions, terms.entropy)
        return terms.log_prob, terms.entropy

    @staticmethod
    def backward(ctx, g_log_prob: torch.Tensor, g_entropy: torch.Tensor):
        logp, actions, entropy = ctx.saved_tensors
        return categorical_grad(CategoricalTerms(None, entropy, logp), actions, g_log_prob, g_entropy), None  # type: ignore[arg-type]


def categorical_log_prob_entropy(logits: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[..., B]`` log pi(a|s) and entropy of logits ``[..., B, n]`` at int actions ``[..., B]``
    (any leading axes, e.g. ``K`` stacked models)."""
    return _CategoricalLogProbEntropy.apply(logits, actions.long())
