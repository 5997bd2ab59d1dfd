"""The fixed KL penalty's options, run label, checks and preset, and its registration (Schulman et
al. 2017, arXiv 1707.06347, §4 and Table 1's "Fixed KL" rows), with the checks the adaptive
penalty shares. The objective itself is :mod:`rlkit.variants.kl_fixed`, imported when a run
builds it.
"""

from __future__ import annotations

import math
from typing import Any

from rlkit.errors import ConfigError
from rlkit.variants.registry import Variant, register_variant, variant_options


@variant_options
class KLFixedOptions:
    """Fixed KL penalty (Schulman et al. 2017, §4): --kl-fixed turns it on, and so does --kl-beta
    at a value other than its default."""

    kl_fixed: bool = False
    """Replace the clipped surrogate by mean(r * A - beta * KL[pi_old, pi]) with a fixed beta (the
    analytic KL per state; categorical and Gaussian policies)."""
    kl_beta: float = 1.0
    """The KL penalty coefficient beta (0 to 1e6)."""

    def validate(self) -> None:
        require_coefficient(self.kl_beta, "kl_beta (beta)", allow_zero=True, most=MAX_BETA)


MAX_BETA = 1e6
"""The largest KL coefficient a run accepts: the paper's range is 0.3 to 10, and a beta near
float32's range makes the penalty overflow the loss in the first update."""


def require_coefficient(value: object, what: str, allow_zero: bool, most: float = math.inf) -> None:
    """One-line :class:`ConfigError` unless ``value`` is a finite number > 0 (>= 0 with
    ``allow_zero``) and at most ``most``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and (value >= 0 if allow_zero else value > 0) and value <= most
    if not ok:
        bound = f" and <= {most:g}" if math.isfinite(most) else ""
        raise ConfigError(f"{what} must be a finite number {'>= 0' if allow_zero else '> 0'}{bound}, got {value!r}")


def refuse_replayed_batches(name: str, cfg: Any) -> None:
    """One line when another enabled variant chooses the batches (HP3O's replayed trajectories), or
    the policy is recurrent: the behaviour policies' distributions are not kept."""
    sources = [v.name for v in cfg.variants.enabled() if v.replaces_batch]
    if sources:
        raise ConfigError(f"variant {name} penalizes the KL to the policy that collected the latest rollout; "
                          f"variant {sources[0]} trains on other data, so the two cannot be combined; use one")
    if getattr(cfg, "memory", ""):
        raise ConfigError(f"variant {name} reads the behaviour policy's distribution of every sample, which a "
                          f"recurrent policy (--memory {cfg.memory}) does not store: use one")


PRESETS = {"ppo-paper-klfix": dict(kl_fixed=True, kl_beta=3.0)}
"""Table 1's best fixed-KL row, beta = 3 (stack it on an env preset)."""

register_variant(Variant("kl_fixed", KLFixedOptions, lambda o: f"klfix-b{o.kl_beta:g}",
                         builders={"gym": "rlkit.variants.kl_fixed:build"},
                         checks={"gym": lambda o, cfg: refuse_replayed_batches("kl_fixed", cfg)},
                         replaces_objective=True, presets=PRESETS))
