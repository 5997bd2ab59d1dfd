"""The adaptive KL penalty's options, run label, checks and preset, and its registration (Schulman
et al. 2017, arXiv 1707.06347, §4 and Table 1's "Adaptive KL" rows). The objective and the hook
that adapts its coefficient are :mod:`rlkit.variants.kl_adaptive`, imported when a run builds them.
"""

from __future__ import annotations

from rlkit.variants.kl_fixed_options import MAX_BETA, refuse_replayed_batches, require_coefficient
from rlkit.variants.registry import Variant, register_variant, variant_options


@variant_options
class KLAdaptiveOptions:
    """Adaptive KL penalty (Schulman et al. 2017, §4): --kl-adaptive turns it on, and so do
    --kl-dtarg and --kl-beta-init at values other than their defaults."""

    kl_adaptive: bool = False
    """Replace the clipped surrogate by mean(r * A - beta * KL[pi_old, pi]), beta adapted after every
    update to keep the KL near --kl-dtarg (categorical and Gaussian policies)."""
    kl_dtarg: float = 0.01
    """The target KL d_targ (> 0): beta halves when the update's mean KL is below d_targ / 1.5 and
    doubles when it is above d_targ * 1.5 (not --target-kl, the early stop any objective may use)."""
    kl_beta_init: float = 1.0
    """The coefficient beta of the first update (> 0, at most 1e6)."""

    def validate(self) -> None:
        require_coefficient(self.kl_dtarg, "kl_dtarg (d_targ)", allow_zero=False)
        require_coefficient(self.kl_beta_init, "kl_beta_init (beta)", allow_zero=False, most=MAX_BETA)


def label(o: KLAdaptiveOptions) -> str:
    """``kladapt-d0.01``, ``kladapt-d0.003-b3`` (a first beta other than 1)."""
    return f"kladapt-d{o.kl_dtarg:g}" + (f"-b{o.kl_beta_init:g}" if o.kl_beta_init != 1 else "")


PRESETS = {"ppo-paper-kladapt": dict(kl_adaptive=True, kl_dtarg=0.01)}
"""Table 1's best adaptive-KL row, d_targ = 0.01 (stack it on an env preset)."""

register_variant(Variant("kl_adaptive", KLAdaptiveOptions, label,
                         builders={"gym": "rlkit.variants.kl_adaptive:build"},
                         checks={"gym": lambda o, cfg: refuse_replayed_batches("kl_adaptive", cfg)},
                         replaces_objective=True, presets=PRESETS))
