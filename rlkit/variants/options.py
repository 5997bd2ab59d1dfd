"""Algorithm-variant options composed into every trainer's config.

Outer-PPO (Tan et al. 2024, arXiv 2411.00666) and HP3O (Liu et al. 2025, arXiv 2502.15968)
switches, their validation and the variant's short name used in run names and hparams.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from rlkit.core.config import require_choices, validation_enabled
from rlkit.errors import ConfigError


@dataclass(frozen=True)
class VariantOptions:
    """Outer-PPO and HP3O fields (flags ``--outer-*`` and ``--hp3o-*``)."""

    # Outer-PPO (Tan et al. 2024, arXiv 2411.00666): the inner PPO epochs estimate theta* and an
    # outer optimizer applies the outer gradient g = theta_k - theta* to theta_k.
    outer: bool = False
    """Apply PPO's update through an outer optimizer (implied by any non-default --outer-* value)."""
    outer_lr: float = 1.0
    """Outer learning rate sigma (1 with no momentum is plain PPO)."""
    outer_momentum: float = 0.0
    """Outer momentum mu (SGD momentum on the outer gradient)."""
    outer_nesterov: bool = False
    """Use Nesterov momentum in the outer step (needs --outer-momentum > 0)."""
    outer_bias: float = 0.0
    """Biased initialization alpha: the inner loop starts from theta_k moved alpha times along the
    previous outer momentum (rollouts still come from theta_k)."""
    outer_bias_form: Literal["momentum", "update"] = "momentum"
    """What biased initialization moves along: momentum = alpha times the outer momentum buffer b
    (theta_k - alpha * b); update = alpha times the previous outer update u (theta_k + alpha * u,
    which includes sigma and the Nesterov term)."""
    outer_anneal: Literal["none", "lr", "momentum", "both"] = "none"
    """Scale the outer learning rate sigma and/or momentum mu by the inner learning rate's annealing
    fraction (1 -> 0 with --anneal-lr), so the outer step fades with the inner one; none keeps them
    constant, and momentum then moves the weights for ~1/(1 - mu) updates after the inner step vanishes."""
    outer_params: Literal["all", "actor"] = "all"
    """Parameters the outer step covers: actor and critic (the paper) or the actor only."""
    outer_optimizer: str = "SGD"
    """Any torch.optim optimizer as the outer one (momentum/Nesterov apply to SGD only)."""

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
    (the authors' code); topup = exactly hp3o_samples, with replacement from short trajectories
    (rlkit's earlier default)."""
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

    def __post_init__(self) -> None:
        if validation_enabled():
            self.validate()

    def validate(self) -> None:
        """One-line :class:`ConfigError` on an invalid or inconsistent variant setting."""
        require_choices(self)  # every Literal-typed switch
        if not (math.isfinite(self.outer_lr) and self.outer_lr > 0):
            raise ConfigError(f"outer_lr (sigma) must be > 0, got {self.outer_lr!r}")
        if not 0 <= self.outer_momentum < 1:
            raise ConfigError(f"outer_momentum must lie in [0, 1), got {self.outer_momentum!r}")
        if self.outer_nesterov and self.outer_momentum == 0:
            raise ConfigError("outer_nesterov needs outer_momentum > 0")
        if not (math.isfinite(self.outer_bias) and self.outer_bias >= 0):
            raise ConfigError(f"outer_bias must be >= 0, got {self.outer_bias!r}")
        if self.outer_bias > 0 and self.outer_bias_form == "momentum" and \
                (self.outer_momentum == 0 or self.outer_optimizer != "SGD"):
            raise ConfigError("outer_bias with outer_bias_form=momentum needs an outer momentum (outer_optimizer "
                              "SGD with outer_momentum > 0); outer_bias_form=update works without")
        if self.outer_anneal in ("momentum", "both") and (self.outer_momentum == 0 or self.outer_optimizer != "SGD"):
            raise ConfigError(f"outer_anneal={self.outer_anneal} needs an outer momentum (SGD, outer_momentum > 0)")
        if self.outer_optimizer != "SGD" and (self.outer_momentum or self.outer_nesterov):
            raise ConfigError("outer_momentum / outer_nesterov apply to the SGD outer optimizer only")
        check_outer_optimizer(self.outer_optimizer, self.outer_lr)
        for name in ("hp3o_buffer_size", "hp3o_trajectories", "hp3o_samples"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.hp3o_trajectories > self.hp3o_buffer_size:
            raise ConfigError(f"hp3o_trajectories={self.hp3o_trajectories} is larger than the buffer "
                              f"hp3o_buffer_size={self.hp3o_buffer_size}")
        if not (math.isfinite(self.hp3o_threshold) and self.hp3o_threshold >= 0):
            raise ConfigError(f"hp3o_threshold must be >= 0, got {self.hp3o_threshold!r}")
        if self.hp3o_advantages == "first-use" and self.hp3o_recompute_values:
            raise ConfigError("hp3o_advantages=first-use keeps the first advantages; it cannot be combined with "
                              "hp3o_recompute_values")
        if self.hp3o_plus and not self.hp3o:
            raise ConfigError("hp3o_plus needs hp3o")

    @property
    def outer_enabled(self) -> bool:
        defaults = VariantOptions.__dataclass_fields__
        names = ("outer_lr", "outer_momentum", "outer_nesterov", "outer_bias", "outer_bias_form", "outer_anneal",
                 "outer_params", "outer_optimizer")
        return self.outer or any(getattr(self, n) != defaults[n].default for n in names)

    @property
    def name(self) -> str:
        """Short name of the algorithm variant, used in run names and hparams, e.g.
        ``ppo``, ``outer-lr1.5``, ``outer-lr1-m0.9-nesterov-bias0.5``, ``hp3o+``, ``outer-lr1.5+hp3o``."""
        parts = []
        if self.outer_enabled:
            name = f"outer-lr{self.outer_lr:g}"
            if self.outer_optimizer != "SGD":
                name += f"-{self.outer_optimizer.lower()}"
            if self.outer_momentum:
                name += f"-m{self.outer_momentum:g}" + ("-nesterov" if self.outer_nesterov else "")
            if self.outer_bias:
                name += f"-bias{self.outer_bias:g}" + ("-upd" if self.outer_bias_form == "update" else "")
            if self.outer_anneal != "none":
                name += f"-anneal-{self.outer_anneal}"
            if self.outer_params == "actor":
                name += "-actor"
            parts.append(name)
        if self.hp3o:
            parts.append("hp3o+" if self.hp3o_plus else "hp3o")
        return "+".join(parts) or "ppo"



def check_outer_optimizer(name: str, lr: float) -> None:
    """The outer optimizer must be a ``torch.optim`` optimizer that steps a dense vector with a
    plain ``step()`` (LBFGS needs a closure, SparseAdam sparse gradients, Optimizer is abstract):
    tried once on a scratch parameter."""
    import torch

    opt = getattr(torch.optim, name, None) if name.isidentifier() else None
    if isinstance(opt, type) and issubclass(opt, torch.optim.Optimizer) and opt is not torch.optim.Optimizer:
        param = torch.nn.Parameter(torch.zeros(2))
        param.grad = torch.ones(2)
        try:
            opt([param], lr=lr).step()
            return
        except Exception:  # noqa: BLE001  (any failure means this optimizer cannot be the outer one)
            pass
    raise ConfigError(f"outer_optimizer {name!r} is not a torch.optim optimizer that steps a dense vector "
                      "(e.g. SGD, Adam, AdamW, RMSprop)")
