"""The plain surrogate's option, run label and preset, and its registration (Schulman et al. 2017,
arXiv 1707.06347, Table 1's "No clipping or penalty" row). The objective itself is
:mod:`rlkit.variants.no_clip`, imported when a run builds it.
"""

from __future__ import annotations

from rlkit.variants.registry import Variant, register_variant, variant_options


@variant_options
class NoClipOptions:
    """PPO's surrogate without clipping or penalty (Schulman et al. 2017, Table 1): flag --unclipped."""

    unclipped: bool = False
    """Train on the plain surrogate mean(r * A): no clipping of the ratio and no KL penalty (the
    value loss and entropy bonus stay as configured)."""
    turn_on = "--unclipped"
    """What turns the variant on (a class attribute, not an option)."""


PRESETS = {"ppo-paper-noclip": dict(unclipped=True)}
"""Table 1's "No clipping or penalty" row (stack it on an env preset)."""

register_variant(Variant("no_clip", NoClipOptions, lambda o: "noclip",
                         builders={"gym": "rlkit.variants.no_clip:build", "rlhf": "rlkit.variants.no_clip:build"},
                         replaces_objective=True, presets=PRESETS))
