"""HP3O's options, run label, checks and presets, and its registration (Liu et al. 2025,
"Enhancing PPO with Trajectory-Aware Hybrid Policies", arXiv 2502.15968). The batch source
itself is :mod:`rlkit.variants.hp3o`, imported when a run builds it.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from rlkit.core.config import ONE_RESPONSE, require_minibatches, require_positive_int
from rlkit.errors import ConfigError
from rlkit.variants.registry import Variant, register_variant, variant_options


@variant_options
class HP3OOptions:
    """HP3O (Liu et al. 2025, arXiv 2502.15968): flags --hp3o*; any of them turns it on."""

    # HP3O (Liu et al. 2025, arXiv 2502.15968): updates on hybrid batches from a FIFO buffer of
    # recent whole trajectories, always including the best-return one.
    hp3o: bool = False
    """Update on hybrid batches from a trajectory buffer instead of the latest rollout."""
    hp3o_buffer_size: int = 20
    """FIFO buffer capacity in complete trajectories (oldest evicted first)."""
    hp3o_trajectories: int = 5
    """Trajectories per hybrid batch k: the best-return one plus k-1 uniform others."""
    hp3o_samples: int = 1280
    """Transitions drawn from the k trajectories for each epoch (split evenly among them)."""
    hp3o_sampling: Literal["paper", "topup"] = "paper"
    """Transitions per epoch: paper = min(hp3o_samples / k, L) of each trajectory without replacement
    (the authors' code); topup = exactly hp3o_samples, with replacement from short trajectories."""
    hp3o_redraw_each_epoch: bool = False
    """Draw the best + k - 1 trajectories anew for every epoch (the authors' code) instead of once
    per update (Gymnasium trainer only)."""
    hp3o_schedule: Literal["rollout", "episode"] = "rollout"
    """When HP3O updates: rollout = once per rollout, from the first finished trajectory on; episode =
    once per episode finished in the rollout, once the buffer holds at least k trajectories (the
    authors' code updates after every episode; here the updates run after the rollout). Gymnasium
    trainer only."""
    hp3o_contiguous_minibatches: bool = False
    """Minibatches as contiguous chunks of the epoch's sample (trajectory by trajectory, so advantage
    normalization is roughly per trajectory), as the authors' code; default: shuffled."""
    hp3o_timeouts_terminal: bool = False
    """Treat time-outs as terminal in HP3O's advantages, as the authors' code does (default: a
    time-out bootstraps from V(final observation), the correct treatment)."""
    hp3o_advantages: Literal["each-update", "first-use"] = "each-update"
    """When a stored trajectory's advantages and value targets are computed: at every update (with
    the current best trajectory for HP3O+), or once, the first time the trajectory is used, and
    reused after (the authors' code caches them). Differs only for HP3O+ (or recomputed values)."""
    hp3o_recompute_values: bool = False
    """Recompute values of replayed states with the current critic (default: stored values)."""
    hp3o_plus: bool = False
    """HP3O+: raise a non-best state's baseline to the best trajectory's value at its nearest state."""
    hp3o_plus_form: Literal["baseline", "td"] = "baseline"
    """HP3O+: replace the baseline at each step (value targets unchanged), or use the best
    trajectory's value V' for the current state in every TD error, r + gamma V(s') - V'(s), with
    A' + V as the value targets (the authors' code)."""
    hp3o_threshold: float = 0.5
    """HP3O+ distance threshold (Euclidean, in the observation space the policy sees: normalized with
    --norm-obs, raw without); a state qualifies at distance <= threshold, so 0 means exact matches
    only (the authors' script)."""

    def validate(self) -> None:
        """One-line :class:`ConfigError` on an invalid or inconsistent HP3O setting."""
        for name in ("hp3o_buffer_size", "hp3o_trajectories", "hp3o_samples"):
            require_positive_int(self, name)
        if self.hp3o_sampling == "paper" and self.hp3o_samples < self.hp3o_trajectories:
            raise ConfigError(f"hp3o_samples={self.hp3o_samples} is smaller than hp3o_trajectories="
                              f"{self.hp3o_trajectories}: paper sampling takes hp3o_samples // hp3o_trajectories = 0 "
                              "transitions of each trajectory (an empty batch)")
        if self.hp3o_trajectories > self.hp3o_buffer_size:
            raise ConfigError(f"hp3o_trajectories={self.hp3o_trajectories} is larger than the buffer "
                              f"hp3o_buffer_size={self.hp3o_buffer_size}")
        if not (isinstance(self.hp3o_threshold, (int, float)) and math.isfinite(self.hp3o_threshold)
                and self.hp3o_threshold >= 0):
            raise ConfigError(f"hp3o_threshold must be >= 0, got {self.hp3o_threshold!r}")
        plus_only = [n for n in ("hp3o_plus_form", "hp3o_threshold")
                     if getattr(self, n) != type(self).__dataclass_fields__[n].default]
        if plus_only and not self.hp3o_plus:
            raise ConfigError(f"{', '.join(plus_only)} applies to HP3O+ only; add hp3o_plus (--hp3o-plus)")
        if self.hp3o_advantages == "first-use" and self.hp3o_recompute_values:
            raise ConfigError("hp3o_advantages=first-use keeps the first advantages; it cannot be combined with "
                              "hp3o_recompute_values")


def label(options: HP3OOptions) -> str:
    return "hp3o+" if options.hp3o_plus else "hp3o"


def check_gym(options: HP3OOptions, cfg: Any) -> None:
    require_minibatches(options.hp3o_samples, cfg.num_minibatches, cfg.norm_adv, "hp3o_samples")


def check_rlhf(options: HP3OOptions, cfg: Any) -> None:
    if options.hp3o_trajectories % cfg.num_minibatches:
        raise ConfigError(f"num_minibatches={cfg.num_minibatches} does not divide hp3o_trajectories="
                          f"{options.hp3o_trajectories} (HP3O batches are whole sequences here)")
    if not cfg.resume:  # refused for a new run; a stored run resumes as it was set (one token: advantage 0)
        require_minibatches(options.hp3o_trajectories, cfg.num_minibatches, cfg.norm_adv, "hp3o_trajectories",
                            ONE_RESPONSE)


RLHF_IGNORES = ("hp3o_samples", "hp3o_sampling", "hp3o_redraw_each_epoch", "hp3o_schedule",
                "hp3o_contiguous_minibatches", "hp3o_timeouts_terminal", "hp3o_advantages", "hp3o_recompute_values",
                "hp3o_plus", "hp3o_plus_form", "hp3o_threshold")
"""On the token env a batch is the chosen whole responses, every response ends the episode, and no
state distance exists for HP3O+: these options have nothing to act on there."""

# The HP3O authors' buffer and sampling sizes: 20 trajectories, k = 5, 1280 transitions per
# epoch, minibatch 128 (10 minibatches), 10 epochs.
_SIZES = dict(hp3o=True, hp3o_buffer_size=20, hp3o_trajectories=5, hp3o_samples=1280, num_minibatches=10,
              update_epochs=10)
# The HP3O authors' full settings (their code): gamma 0.99, lambda 0.92, clip and value clip 0.2 with
# Stable-Baselines3's value loss mean((V_clip - R)^2), entropy 4e-4, grad norm 0.8, Adam at constant
# lr 5e-4 and torch's eps 1e-8, 128x128 tanh networks, no observation or reward normalization, buffer
# 20, k 5, 1280 transitions (min(1280 / k, L) of each trajectory), the k trajectories redrawn every
# epoch, minibatch 128 in contiguous chunks, 10 epochs, an update after every finished episode once k
# are stored, every episode end terminal; HP3O+ in its TD form with a threshold of 0 on raw
# observations (exact matches). The env preset's env count and rollout length stay: the authors'
# exact timing (one env, the update between episodes) is ``--num-envs 1 --num-steps 1``.
_PAPER = dict(_SIZES, hp3o_sampling="paper", hp3o_timeouts_terminal=True, hp3o_contiguous_minibatches=True,
              hp3o_redraw_each_epoch=True, hp3o_schedule="episode", gamma=0.99, gae_lambda=0.92, clip_coef=0.2,
              clip_vloss=True, vloss_form="clipped-mse", ent_coef=4e-4, max_grad_norm=0.8, learning_rate=5e-4,
              anneal_lr=False, adam_eps=1e-8, norm_obs=False, norm_reward=False, hidden_sizes=(128, 128))
PRESETS = {"hp3o": _SIZES, "hp3o-plus": dict(_SIZES, hp3o_plus=True), "hp3o-paper": _PAPER,
           "hp3o-plus-paper": dict(_PAPER, hp3o_plus=True, hp3o_plus_form="td", hp3o_threshold=0.0)}
"""``rlkit train --preset`` settings of Liu et al. (2025): the authors' sizes, and their full settings."""

register_variant(Variant("hp3o", HP3OOptions, label,
                         builders={"gym": "rlkit.variants.hp3o:build_gym", "rlhf": "rlkit.variants.hp3o:build_rlhf"},
                         unsupported={"rlhf": RLHF_IGNORES}, checks={"gym": check_gym, "rlhf": check_rlhf},
                         replaces_batch=True, presets=PRESETS))
