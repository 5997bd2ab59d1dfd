"""The annealed clip range's option, run label and check, and its registration: the clipped
surrogate whose epsilon falls linearly to 0 over the run with the learning rate, as the RL
Baselines3 Zoo's ``clip_range: lin_0.2`` settings do (Stable-Baselines3 takes a schedule for
``clip_range``). The objective is :mod:`rlkit.variants.anneal_clip`, imported when a run builds it.
"""

from __future__ import annotations

from typing import Any

from rlkit.errors import ConfigError
from rlkit.variants.registry import Variant, register_variant, variant_options


@variant_options
class AnnealClipOptions:
    """The clip range annealed with the learning rate: flag --anneal-clip."""

    anneal_clip: bool = False
    """Anneal the clip range epsilon (--clip-coef, and the value clip with --clip-vloss) linearly
    towards 0 over the run, by the learning rate's schedule: 1/N of it at the last of N updates
    (needs --anneal-lr)."""
    turn_on = "--anneal-clip"
    """What turns the variant on (a class attribute, not an option)."""


def require_annealed_lr(options: AnnealClipOptions, cfg: Any) -> None:
    """The clip range follows the learning rate's schedule: without --anneal-lr it would not move."""
    if not cfg.anneal_lr:
        raise ConfigError("--anneal-clip anneals the clip range by the learning rate's schedule; add --anneal-lr "
                          "(the learning rate then anneals too) or drop --anneal-clip")


register_variant(Variant("anneal_clip", AnnealClipOptions, lambda o: "annealclip",
                         builders={"gym": "rlkit.variants.anneal_clip:build"},
                         checks={"gym": require_annealed_lr}, replaces_objective=True))
