"""How the token losses of an RLHF minibatch make its loss (TRL's ``loss_type``): the objective
of the ``loss_type`` variant (options and registration: :mod:`rlkit.variants.loss_type_options`).

PPO's clipped surrogate per token, ``l_t = max(-A r_t, -A clip(r_t, 1 - eps, 1 + eps))``, over the
``S`` responses of a minibatch, response ``i`` of ``L_i`` tokens:

- ``dapo`` (Yu et al. 2025, arXiv 2503.14476): ``sum_t l_t / sum_i L_i``, every token weighs the
  same. This is the core's default objective, whose mean runs over the minibatch's tokens.
- ``grpo`` (Shao et al. 2024, arXiv 2402.03300): ``(1/S) sum_i (1/L_i) sum_{t in i} l_t``, every
  response weighs the same, so a long response's tokens weigh less.
- ``dr_grpo`` (Liu et al. 2025, "Understanding R1-Zero-Like Training", arXiv 2503.20783):
  ``sum_t l_t / (S * max_new_tokens)``, a constant divisor: no length bias in either direction.

The value loss and the entropy bonus stay the core's (:func:`rlkit.core.objective.objective_terms`).
"""

from __future__ import annotations

import torch

from rlkit.core.config import PPOConfig
from rlkit.core.objective import ObjectiveInputs, ObjectiveTerms, objective_terms, whitened
from rlkit.variants.loss_type_options import LossTypeOptions
from rlkit.variants.registry import Plug, PlugContext


def aggregate_tokens(token_losses: torch.Tensor, segments: torch.Tensor, form: str, max_len: int) -> torch.Tensor:
    """The minibatch's loss from ``[B]`` token losses, ``segments [B]`` each token's response
    (``0 .. S-1``), as ``form`` (``dapo``, ``grpo`` or ``dr_grpo``) aggregates them."""
    if form == "dapo":
        return token_losses.mean()
    counts = torch.bincount(segments).to(token_losses.dtype)
    responses = int((counts > 0).sum())
    if form == "dr_grpo":
        return token_losses.sum() / (responses * max_len)
    sums = torch.zeros_like(counts).index_add_(0, segments, token_losses)
    return (sums[counts > 0] / counts[counts > 0]).mean()


class SequenceAggregated:
    """The clipped surrogate with its token losses aggregated as ``form`` says (see the module)."""

    is_default = False
    needs_dist_params = False

    def __init__(self, form: str, max_len: int) -> None:
        if max_len <= 0:
            raise ValueError("a sequence aggregation needs the trainer's longest sequence (max_new_tokens)")
        self.form, self.max_len = form, max_len
        self.name = f"clip-{form}"

    def __call__(self, inputs: ObjectiveInputs, hp: PPOConfig, dim: int | None = None) -> ObjectiveTerms:
        if dim is not None or inputs.segments is None:
            raise ValueError(f"the objective {self.name!r} aggregates over responses: one policy's minibatch of "
                             "whole sequences only")
        log_ratio = inputs.new_log_probs - inputs.old_log_probs
        advantages = whitened(inputs.advantages, hp)
        ratio = log_ratio.exp()
        token_losses = torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - hp.clip_coef, 1 + hp.clip_coef))
        pg_loss = aggregate_tokens(token_losses, inputs.segments, self.form, self.max_len)
        return objective_terms(pg_loss, log_ratio, inputs, hp)


def build(options: LossTypeOptions, ctx: PlugContext) -> Plug:
    return Plug(objective=SequenceAggregated(options.loss_type, ctx.max_sequence))


__all__ = ["LossTypeOptions", "SequenceAggregated", "aggregate_tokens", "build"]
