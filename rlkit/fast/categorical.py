"""Categorical log-prob and entropy as one autograd node (the fast path of
:meth:`rlkit.core.heads.CategoricalHead.log_prob_entropy`)."""

from __future__ import annotations

import torch


class _CategoricalLogProbEntropy(torch.autograd.Function):
    """``log_softmax(z)[a]`` and ``H = -sum(p log p)`` from one log-softmax, with the gradient
    written out: ``d log p_a / dz = onehot(a) - p`` and ``dH/dz = -p (log p + H)``.

    One node instead of ~8 (fewer per-op costs on small CPU batches) that keeps only the
    log-probabilities for backward (one ``[B, V]`` tensor for a language model's vocabulary
    instead of three). Tested against the plain head.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, actions: torch.Tensor):
        logp = torch.log_softmax(logits, dim=-1)
        entropy = -(logp.exp() * logp).sum(-1)
        ctx.save_for_backward(logp, actions, entropy)
        return logp.gather(-1, actions[..., None])[..., 0], entropy

    @staticmethod
    def backward(ctx, g_log_prob: torch.Tensor, g_entropy: torch.Tensor):
        logp, actions, entropy = ctx.saved_tensors
        p = logp.exp()
        # -g_H p (log p + H) - g_lp p, then + g_lp at the taken action
        grad = (logp + entropy[..., None]).mul_(g_entropy[..., None]).add_(g_log_prob[..., None]).mul_(p).neg_()
        grad.scatter_add_(-1, actions[..., None], g_log_prob[..., None])
        return grad, None


def categorical_log_prob_entropy(logits: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[..., B]`` log pi(a|s) and entropy of logits ``[..., B, n]`` at int actions ``[..., B]``
    (any leading axes: a population's members)."""
    return _CategoricalLogProbEntropy.apply(logits, actions.long())
