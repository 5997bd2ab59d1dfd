"""The plain surrogate: PPO's objective without clipping or penalty (Schulman et al. 2017,
arXiv 1707.06347, Table 1's "No clipping or penalty" row).

The policy loss is ``-mean(r * A)`` with ``r = pi(a|s) / pi_behaviour(a|s)`` and ``A`` the
advantages as the core whitens them (``--norm-adv``); the value loss and the entropy bonus stay
the core's (:func:`rlkit.core.objective.objective_terms`: with ``--clip-vloss`` the value loss is
still clipped to ``--clip-coef``). ``losses/clipfrac`` keeps measuring how often the ratio leaves
``[1 - eps, 1 + eps]``, though nothing is clipped. The option, run label and registration are
:mod:`rlkit.variants.no_clip_options`.
"""

from __future__ import annotations

import torch

from rlkit.core.config import PPOConfig
from rlkit.core.objective import ObjectiveInputs, ObjectiveTerms, objective_terms, whitened
from rlkit.variants.no_clip_options import NoClipOptions
from rlkit.variants.registry import Plug, PlugContext


def surrogate(log_ratio: torch.Tensor, advantages: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """``-mean(r * A)`` of ``[B]`` (or ``[K, B]`` with ``dim``) log-ratios and advantages."""
    gain = log_ratio.exp() * advantages
    return -(gain.mean() if dim is None else gain.mean(dim))


class PlainSurrogate:
    """The objective: :func:`surrogate` plus the core's value loss and entropy bonus."""

    name = "noclip"
    is_default = False
    needs_dist_params = False

    def __call__(self, inputs: ObjectiveInputs, hp: PPOConfig, dim: int | None = None) -> ObjectiveTerms:
        log_ratio = inputs.new_log_probs - inputs.old_log_probs
        pg_loss = surrogate(log_ratio, whitened(inputs.advantages, hp, dim), dim)
        return objective_terms(pg_loss, log_ratio, inputs, hp, dim)


def build(options: NoClipOptions, ctx: PlugContext) -> Plug:
    return Plug(objective=PlainSurrogate())


__all__ = ["NoClipOptions", "PlainSurrogate", "build", "surrogate"]
