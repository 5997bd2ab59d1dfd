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

import math
from dataclasses import replace
from typing import Any, Literal

import torch

from rlkit.core.config import require_positive_int
from rlkit.core.token_grid import LMRollout, TokenGrid
from rlkit.errors import ConfigError
from rlkit.variants.base import Stateless
from rlkit.variants.registry import Plug, PlugContext, Variant, register_variant, variant_options


@variant_options
class GroupOptions:
    """Critic-free group advantages on the token env (RLOO, GRPO): flags --group-*; any of them
    turns the variant on, and the run then has no value model."""

    group_size: int = 1
    """Responses per prompt g in each rollout (>= 2; num_envs is a multiple of it)."""
    group_form: Literal["rloo", "grpo"] = "rloo"
    """rloo: R_i minus the mean of the other g - 1 returns (Ahmadian et al. 2024); grpo: (R_i - group mean) /
    (group std + group_eps) (Shao et al. 2024)."""
    group_eps: float = 1e-4
    """GRPO: added to the group's standard deviation (a group of equal returns gets advantage 0)."""
    turn_on = "--group-size 2 or more"
    """What turns the variant on (a class attribute, not an option): an option named at its default
    alone is refused with this hint (rlkit.cli)."""

    def validate(self) -> None:
        require_positive_int(self, "group_size")
        if self.enabled and self.group_size < 2:
            raise ConfigError(f"group advantages need group_size >= 2 responses per prompt, got {self.group_size}")
        if not (isinstance(self.group_eps, (int, float)) and math.isfinite(self.group_eps) and self.group_eps > 0):
            raise ConfigError(f"group_eps must be a finite number > 0, got {self.group_eps!r}")


def rloo_advantages(returns: torch.Tensor) -> torch.Tensor:
    """``[G, g]`` -> ``[G, g]``: each return minus the mean of the other ``g - 1`` in its row."""
    g = returns.shape[-1]
    others = (returns.sum(-1, keepdim=True) - returns) / (g - 1)
    return returns - others


def grpo_advantages(returns: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """``[G, g]`` -> ``[G, g]``: returns standardized within each row (unbiased std, plus ``eps``)."""
    return (returns - returns.mean(-1, keepdim=True)) / (returns.std(-1, keepdim=True) + eps)


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
            per_sequence = grpo_advantages(returns, self.options.group_eps)
        advantages = grid.valid.float() * per_sequence.reshape(1, -1)
        stats = {"group/return_std": float(returns.std(-1).mean()),
                 "group/advantage_abs": float(per_sequence.abs().mean())}
        return replace(grid, advantages=advantages), stats


def label(options: GroupOptions) -> str:
    return f"{options.group_form}-g{options.group_size}"


def build_rlhf(options: GroupOptions, ctx: PlugContext) -> Plug:
    return Plug(source=GroupAdvantages(options), group_size=options.group_size)


NO_EFFECT = ("vf_coef", "clip_vloss", "vloss_form", "gae_lambda", "gamma")
"""PPO fields with no effect here: there is no value function, and a response's return is the
undiscounted sum of its rewards."""


def check_rlhf(options: GroupOptions, cfg: Any) -> None:
    if cfg.separate_critic:
        raise ConfigError("separate_critic needs a value model; the group variant (RLOO/GRPO) has none")
    default = type(cfg)()
    changed = [name for name in NO_EFFECT if getattr(cfg, name) != getattr(default, name)]
    if changed and not cfg.resume:  # refused for a new run; a stored run resumes as it was set
        raise ConfigError(f"the group variant (RLOO/GRPO) has no value function and undiscounted returns; "
                          f"{', '.join(changed)} would have no effect (leave at the default)")
    if cfg.num_envs % options.group_size:
        raise ConfigError(f"num_envs={cfg.num_envs} is not a multiple of group_size={options.group_size} "
                          "(each prompt is answered group_size times per rollout)")


register_variant(Variant("group", GroupOptions, label, builders={"rlhf": build_rlhf}, checks={"rlhf": check_rlhf},
                         replaces_batch=True, critic=False))
