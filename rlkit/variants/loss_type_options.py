"""The RLHF loss's token aggregation as an objective variant: its option, run label and
registration. The objective itself is :mod:`rlkit.variants.loss_type`, imported when a run builds it.
"""

from __future__ import annotations

from typing import Literal

from rlkit.variants.registry import Variant, register_variant, variant_options


@variant_options
class LossTypeOptions:
    """How the token losses of a minibatch of responses make its loss, as TRL's loss_type; the
    default, dapo, is the core's own mean over tokens."""

    loss_type: Literal["dapo", "grpo", "dr_grpo"] = "dapo"
    """dapo: the mean over the minibatch's tokens (Yu et al. 2025), the default objective itself (runs
    without the flag, which then is refused as changing nothing); grpo: each response's token mean,
    then the mean over responses (Shao et al. 2024); dr_grpo: the sum over tokens divided by
    responses x max_new_tokens (Liu et al. 2025)."""
    turn_on = "--loss-type grpo or dr_grpo"
    """What turns the variant on (a class attribute, not an option)."""


def label(options: LossTypeOptions) -> str:
    return options.loss_type.replace("_", "")


register_variant(Variant("loss_type", LossTypeOptions, label, builders={"rlhf": "rlkit.variants.loss_type:build"},
                         replaces_objective=True))
