"""Outer-PPO's options, run label and presets, and its registration (Tan et al. 2024, "Beyond the
Boundaries of PPO", arXiv 2411.00666). The outer step itself is :mod:`rlkit.variants.outer`,
imported when a run builds it.
"""

from __future__ import annotations

import math
from typing import Literal

from rlkit.core.config import FLOAT32_MAX
from rlkit.errors import ConfigError
from rlkit.variants.registry import Variant, register_variant, variant_options


@variant_options
class OuterOptions:
    """Outer-PPO (Tan et al. 2024, arXiv 2411.00666): flags --outer-*; any of them turns it on."""

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
    outer momentum of the last update (the rollouts come from theta_k)."""
    outer_bias_form: Literal["momentum", "update"] = "momentum"
    """What biased initialization moves along: momentum = alpha times the outer momentum buffer b
    (theta_k - alpha * b); update = alpha times the last outer update u (theta_k + alpha * u,
    which includes sigma and the Nesterov term)."""
    outer_grad_from: Literal["start", "theta"] = "start"
    """With biased initialization, where the outer gradient is measured from: start = the biased inner
    starting point - theta* (the inner loop's own movement: b_k = mu b_k-1 - delta_k); theta = theta_k -
    theta* (the bias feeds back, b_k = (mu + alpha) b_k-1 - delta_k, and mu + alpha >= 1 never decays;
    it collapses on Hopper). Which form Tan et al. (2024) use is unverified. Without a bias both are
    the same."""
    outer_anneal: Literal["none", "lr", "momentum", "both"] = "none"
    """Scale the outer learning rate sigma and/or momentum mu by the inner learning rate's annealing
    fraction (1 -> 0 with --anneal-lr), so the outer step fades with the inner one; none keeps them
    constant, and momentum then moves the weights for ~1/(1 - mu) updates after the inner step vanishes."""
    outer_params: Literal["all", "actor"] = "all"
    """Parameters the outer step covers: actor and critic (the paper) or the actor only."""
    outer_optimizer: str = "SGD"
    """Any torch.optim optimizer as the outer one (momentum/Nesterov apply to SGD only)."""

    def validate(self) -> None:
        """One-line :class:`ConfigError` on an invalid or inconsistent Outer-PPO setting."""
        if not (isinstance(self.outer_lr, (int, float)) and math.isfinite(self.outer_lr) and self.outer_lr > 0):
            raise ConfigError(f"outer_lr (sigma) must be > 0, got {self.outer_lr!r}")
        if self.outer_lr > FLOAT32_MAX:  # the outer step scales float32 parameters by it
            raise ConfigError(f"outer_lr (sigma) must be at most {FLOAT32_MAX:.4g} (float32), got {self.outer_lr!r}")
        if not 0 <= self.outer_momentum < 1:
            raise ConfigError(f"outer_momentum must lie in [0, 1), got {self.outer_momentum!r}")
        if self.outer_nesterov and self.outer_momentum == 0:
            raise ConfigError("outer_nesterov needs outer_momentum > 0")
        if not (math.isfinite(self.outer_bias) and self.outer_bias >= 0):
            raise ConfigError(f"outer_bias must be a finite number >= 0, got {self.outer_bias!r}")
        momentum = self.outer_momentum > 0 and self.outer_optimizer == "SGD"
        if self.outer_bias > 0 and self.outer_bias_form == "momentum" and not momentum:
            raise ConfigError("outer_bias with outer_bias_form=momentum needs an outer momentum (outer_optimizer "
                              "SGD with outer_momentum > 0); outer_bias_form=update works without")
        if self.outer_grad_from == "theta" and not self.outer_bias:
            raise ConfigError("outer_grad_from=theta applies to biased initialization; add outer_bias > 0")
        if self.outer_anneal in ("momentum", "both") and not momentum:
            raise ConfigError(f"outer_anneal={self.outer_anneal} needs an outer momentum (SGD, outer_momentum > 0)")
        if self.outer_optimizer != "SGD" and (self.outer_momentum or self.outer_nesterov):
            raise ConfigError("outer_momentum / outer_nesterov apply to the SGD outer optimizer only")
        if self.outer_optimizer != "SGD":  # SGD steps any dense vector at an lr > 0 (checked above)
            check_outer_optimizer(self.outer_optimizer, self.outer_lr)


def label(o: OuterOptions) -> str:
    """``outer-lr1.5``, ``outer-lr1-m0.9-nesterov-bias0.5``, ``outer-lr1-adam-actor``, ..."""
    name = f"outer-lr{o.outer_lr:g}"
    if o.outer_optimizer != "SGD":
        name += f"-{o.outer_optimizer.lower()}"
    if o.outer_momentum:
        name += f"-m{o.outer_momentum:g}" + ("-nesterov" if o.outer_nesterov else "")
    if o.outer_bias:
        name += f"-bias{o.outer_bias:g}" + ("-upd" if o.outer_bias_form == "update" else "")
    if o.outer_grad_from == "theta":
        name += "-from-theta"
    if o.outer_anneal != "none":
        name += f"-anneal-{o.outer_anneal}"
    if o.outer_params == "actor":
        name += "-actor"
    return name


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


PRESETS = {
    "outer-lr": dict(outer=True, outer_lr=1.5),
    "outer-nesterov": dict(outer=True, outer_lr=1.0, outer_momentum=0.5, outer_nesterov=True),
    "outer-biased": dict(outer=True, outer_lr=1.0, outer_momentum=0.5, outer_bias=0.5),
}
"""The configurations of Tan et al. (2024) the ablations run: outer learning rate, Nesterov momentum,
biased initialization."""

register_variant(Variant("outer", OuterOptions, label, builders={"gym": "rlkit.variants.outer:build",
                                                                "rlhf": "rlkit.variants.outer:build"},
                         presets=PRESETS))
