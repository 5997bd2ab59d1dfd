"""A PPO minibatch step of ``K`` stacked MLP actor-critics (:mod:`rlkit.fast.stacked_mlp`) with a
categorical head, without autograd: both stacks forward in numpy
(:func:`rlkit.fast.stacked_mlp.numpy_forward`), the loss and its gradient written out
(:func:`rlkit.fast.categorical.categorical_terms`, :func:`rlkit.fast.loss.objective` and their
gradients), and the numpy backward straight into ``theta.grad [K, P]``.

Why: with the fused nodes a stacked step still pays autograd's engine, three nodes' contexts, a
copy of the node's gradient buffer and its accumulation into ``theta.grad`` (with a zeroing
first), a sizeable share of a small model's minibatch step. The functions are the fused nodes'
own, called in the order autograd calls them, so the gradient has the fused path's bits (tested
with ``torch.equal``).
"""

from __future__ import annotations

import numpy as np
import torch

from rlkit.core.buffer import Batch
from rlkit.core.config import PPOConfig
from rlkit.core.loss import LossOutput, normalize_advantages
from rlkit.fast.categorical import categorical_grad, categorical_terms
from rlkit.fast.loss import objective, objective_grads
from rlkit.fast.stacked_mlp import StackedFusedMLP, numpy_backward, numpy_forward


class DirectStep:
    """Forward, loss and gradient of every model's minibatch; the gradient overwrites all of
    ``grad`` (the layers cover theta: :func:`covers`), so nothing needs zeroing first."""

    def __init__(self, mlp: StackedFusedMLP, grad: torch.Tensor, hp: PPOConfig) -> None:
        self.actor, self.critic = mlp.numpy_layers(grad)
        self.hp = hp

    def __call__(self, mb: Batch, weights: torch.Tensor) -> LossOutput:
        """``[K]`` losses (``[K, B]`` log-ratios) of ``[K, B, ...]`` float32 minibatch fields, and
        the gradient of ``sum(weights * loss)`` (``weights [K]``: 1 for a model that steps, 0 for
        one carried along) written into ``grad``."""
        hp = self.hp
        x = np.ascontiguousarray(mb.obs.numpy())
        logits, actor_inputs = numpy_forward(self.actor, x)
        values, critic_inputs = numpy_forward(self.critic, x)
        actions = mb.actions.long()
        cat = categorical_terms(torch.from_numpy(logits), actions)
        entropy = cat.entropy.mean(1)
        advantages = normalize_advantages(mb.advantages, 1) if hp.norm_adv else mb.advantages
        obj = objective(cat.log_prob, entropy, torch.from_numpy(values[..., 0]), mb.log_probs, advantages,
                        mb.returns, mb.values, hp.clip_coef, hp.clip_vloss, hp.ent_coef, hp.vf_coef,
                        hp.vloss_form, dim=1)
        grads = objective_grads(obj.pg_slope, obj.v_slope, weights, hp.ent_coef, hp.vf_coef, dim=1)
        n = x.shape[1]
        g_entropy = grads.entropy.unsqueeze(1).expand(-1, n) / n  # the mean's gradient, as autograd forms it
        g_logits = categorical_grad(cat, actions, grads.log_probs, g_entropy)
        numpy_backward(self.actor, actor_inputs, np.ascontiguousarray(g_logits.numpy()))
        numpy_backward(self.critic, critic_inputs, np.ascontiguousarray(grads.values.numpy()[..., None]))
        return LossOutput(obj.loss, obj.pg_loss, obj.v_loss, entropy, obj.log_ratio)


def covers(mlp: StackedFusedMLP, size: int) -> bool:
    """Whether the actor's and critic's weights and biases tile a ``size``-long parameter vector
    (no gap, no overlap: no parameter the direct step would leave without a gradient)."""
    parts = sorted((s.start, s.stop) for spec in mlp.spec for w, b, _ in spec for s in (w, b))
    ends = [0] + [stop for _, stop in parts]
    return all(start == end for (start, _), end in zip(parts, ends)) and ends[-1] == size
