"""Critic-free group-relative advantages for the token-level LLM env: RLOO and GRPO.

Each prompt is answered ``g`` times (``group_size``) in one rollout and a response's advantage
comes from the other answers to the same prompt, so no value model is built: no critic
forward, backward or memory. The PPO clipped loss and the per-token KL penalty to the frozen
reference are the core's, unchanged; a response's return ``R`` is the sum of its KL-shaped
rewards (the score minus beta times the per-token KL, gamma = 1), and every token of the
response gets the response's advantage.

- RLOO (Kool et al. 2019, "Buy 4 REINFORCE samples, get a baseline for free!"; Ahmadian et al.
  2024, arXiv 2402.14740): ``A_i = R_i - mean_{j != i} R_j``, the leave-one-out baseline.
- GRPO (Shao et al. 2024, DeepSeekMath, arXiv 2402.03300): ``A_i = (R_i - mean_j R_j) / (std_j R_j + eps)``
  over the group (the unbiased standard deviation).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from rlkit.core.token_grid import LMRollout, TokenGrid
from rlkit.variants.base import Stateless
from rlkit.variants.group_options import GroupOptions
from rlkit.variants.registry import Plug, PlugContext


def rloo_advantages(returns: torch.Tensor) -> torch.Tensor:
    """``[G, g]`` -> ``[G, g]``: each return minus the mean of the other ``g - 1`` in its row."""
    g = returns.shape[-1]
    others = (returns.sum(-1, keepdim=True) - returns) / (g - 1)
    return returns - others


def grpo_advantages(returns: torch.Tensor, eps: float = 1e-4, scale: str = "group") -> torch.Tensor:
    """``[G, g]`` -> ``[G, g]``: each return minus its row's mean, divided by the row's unbiased std
    (``scale="group"``), the whole batch's (``"batch"``) or nothing (``"none"``), plus ``eps``."""
    centred = returns - returns.mean(-1, keepdim=True)
    if scale == "none":
        return centred
    std = returns.std(-1, keepdim=True) if scale == "group" else returns.std()
    return centred / (std + eps)


def sequence_returns(grid: TokenGrid) -> torch.Tensor:
    """``[N]`` each response's undiscounted sum of rewards over its valid tokens."""
    return grid.rewards.masked_fill(~grid.valid, 0.0).sum(0)


class GroupAdvantages(Stateless):
    """A batch source: the latest grid with group-relative advantages on every valid token."""

    name = "group"

    def __init__(self, options: GroupOptions) -> None:
        self.options = options

    def batches(self, rollout: LMRollout, update: int) -> tuple[TokenGrid, dict[str, float]]:
        grid, g = rollout.grid, self.options.group_size
        returns = sequence_returns(grid).view(-1, g)  # sub-envs i*g .. i*g + g - 1 share a prompt
        if self.options.group_form == "rloo":
            per_sequence = rloo_advantages(returns)
        else:
            per_sequence = grpo_advantages(returns, self.options.group_eps, self.options.group_scale)
        advantages = grid.valid.float() * per_sequence.reshape(1, -1)
        scores = rollout.env_rewards.masked_fill(~grid.valid, 0.0).sum(0).view(-1, g)  # the rewards before the KL
        stats = {"group/return_std": float(returns.std(-1).mean()),
                 "group/advantage_abs": float(per_sequence.abs().mean()),
                 "group/frac_reward_zero_std": float((scores.std(-1) == 0).float().mean())}
        return replace(grid, advantages=advantages), stats


def build_rlhf(options: GroupOptions, ctx: PlugContext) -> Plug:
    return Plug(source=GroupAdvantages(options), group_size=options.group_size)


__all__ = ["GroupAdvantages", "GroupOptions", "build_rlhf", "grpo_advantages", "rloo_advantages"]
