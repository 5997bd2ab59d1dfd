"""The group variant's options, run label and checks, and its registration: critic-free
group-relative advantages (RLOO, GRPO) for the token-level LLM env, the RLHF trainer's only. The
advantages themselves are :mod:`rlkit.variants.group`, imported when a run builds them.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from rlkit.core.config import require_positive_int
from rlkit.errors import ConfigError
from rlkit.variants.registry import Variant, register_variant, variant_options


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
    group_scale: Literal["group", "batch", "none"] = "group"
    """GRPO: divide each advantage by the std of its group's returns, of the whole batch's, or by
    nothing (TRL's scale_rewards; Dr. GRPO, Liu et al. 2025, divides by nothing). The core's
    --norm-adv whitening per minibatch removes a constant scale: batch and none differ only with
    --no-norm-adv."""
    turn_on = "--group-size 2 or more"
    """What turns the variant on (a class attribute, not an option): an option named at its default
    alone is refused with this hint (rlkit.cli)."""

    def validate(self) -> None:
        require_positive_int(self, "group_size")
        if self.enabled and self.group_size < 2:
            raise ConfigError(f"group advantages need group_size >= 2 responses per prompt, got {self.group_size}")
        if not (isinstance(self.group_eps, (int, float)) and math.isfinite(self.group_eps) and self.group_eps > 0):
            raise ConfigError(f"group_eps must be a finite number > 0, got {self.group_eps!r}")
        if self.group_form == "rloo" and self.group_scale != "group":
            raise ConfigError(f"group_scale={self.group_scale!r} scales GRPO's advantages; RLOO's are not scaled "
                              "(set group_form grpo)")


def label(options: GroupOptions) -> str:
    scale = "" if options.group_scale == "group" else f"-scale{options.group_scale}"
    return f"{options.group_form}-g{options.group_size}{scale}"


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


register_variant(Variant("group", GroupOptions, label, builders={"rlhf": "rlkit.variants.group:build_rlhf"},
                         checks={"rlhf": check_rlhf}, replaces_batch=True, critic=False))
