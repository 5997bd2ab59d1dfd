"""Outer-PPO (Tan et al. 2024, "Beyond the Boundaries of PPO", arXiv 2411.00666).

PPO's inner epochs (ordinary PPO with its own persistent Adam) move the parameters from the
inner starting point to theta*_k. The outer gradient is ``g_k = theta_k - theta*_k`` and an outer
optimizer applies it to theta_k: ``theta_{k+1} = theta_k - sigma * step(g_k)`` (plain, momentum or
Nesterov as in ``torch.optim.SGD``, or any torch optimizer). Plain PPO is sigma = 1, mu = 0.
"""

from __future__ import annotations

import math
from typing import Literal, Mapping

import torch
from torch import nn

from rlkit.core.optim import FlatParameters
from rlkit.errors import ConfigError
from rlkit.variants.base import UpdateHook, VariantState
from rlkit.variants.registry import Plug, PlugContext, Variant, register_variant, variant_options


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
    previous outer momentum (rollouts still come from theta_k)."""
    outer_bias_form: Literal["momentum", "update"] = "momentum"
    """What biased initialization moves along: momentum = alpha times the outer momentum buffer b
    (theta_k - alpha * b); update = alpha times the previous outer update u (theta_k + alpha * u,
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
        if self.outer_lr > torch.finfo(torch.float32).max:  # the outer step scales float32 parameters by it
            raise ConfigError(f"outer_lr (sigma) must be at most {torch.finfo(torch.float32).max:.4g} (float32), "
                              f"got {self.outer_lr!r}")
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


class OuterStep(UpdateHook):
    """An update hook. Holds the outer optimizer and applies outer steps to a slice of a :class:`FlatParameters`.

    The torch optimizer runs on a scratch parameter that is zero before every step, so after
    ``step()`` it holds exactly the update ``u = -sigma * d`` (d: SGD's direction, momentum
    included). The new parameters are then taken, per entry, from whichever end is closer,
    as ``torch.lerp`` does: ``theta_k + u`` or ``theta* + (g + u)``. Both are theta_k - sigma*d; the
    choice makes sigma = 0 return theta_k and sigma = 1, mu = 0 return theta* bit for bit.
    """

    name = "outer"

    def __init__(self, flat: FlatParameters, lr: float, momentum: float = 0.0, nesterov: bool = False,
                 bias: float = 0.0, actor_only: bool = False, optimizer: str = "SGD", bias_form: str = "momentum",
                 anneal: str = "none", grad_from: str = "start") -> None:
        lr = float(lr)  # an int sigma beyond int64 (within float32) is a float to torch.optim
        self.flat, self.grad_from = flat, grad_from
        self.size = flat.split if actor_only else flat.data.numel()
        self.bias, self.bias_form, self.anneal = bias, bias_form, anneal
        self.base = {"lr": lr, "momentum": momentum}
        self.prev_update: torch.Tensor | None = None
        self.delta = nn.Parameter(torch.zeros(self.size, device=flat.data.device, dtype=flat.data.dtype))
        kwargs: dict[str, object] = {"lr": lr}
        if optimizer == "SGD":
            kwargs.update(momentum=momentum, nesterov=nesterov)
        self.optimizer: torch.optim.Optimizer = getattr(torch.optim, optimizer)([self.delta], **kwargs)
        self.theta_k: torch.Tensor | None = None
        self.start: torch.Tensor | None = None
        """The inner loop's starting point (theta_k moved by the bias), when the gradient is taken from it."""
        self.prev_grad: torch.Tensor | None = None

    @classmethod
    def from_options(cls, options: OuterOptions, flat: FlatParameters) -> "OuterStep":
        """The outer step the options ask for."""
        return cls(flat, options.outer_lr, options.outer_momentum, options.outer_nesterov, options.outer_bias,
                   options.outer_params == "actor", options.outer_optimizer, options.outer_bias_form,
                   options.outer_anneal, options.outer_grad_from)

    def schedule(self, fraction: float) -> None:
        """The inner learning rate is ``fraction`` of its initial value: with ``anneal`` scale sigma
        and/or mu by it (called by the run loop before every update)."""
        group = self.optimizer.param_groups[0]
        if self.anneal in ("lr", "both"):
            group["lr"] = self.base["lr"] * fraction
        if self.anneal in ("momentum", "both"):
            group["momentum"] = self.base["momentum"] * fraction

    @property
    def theta(self) -> torch.Tensor:
        """``[P_outer]`` the covered slice of the live parameter vector."""
        return self.flat.data[: self.size]

    @property
    def momentum_buffer(self) -> torch.Tensor | None:
        return self.optimizer.state.get(self.delta, {}).get("momentum_buffer")

    @torch.no_grad()
    def begin(self) -> None:
        """Before the inner epochs: remember theta_k (the rollout policy) and, with biased
        initialization, move the inner starting point alpha times along the previous outer
        momentum (in the direction the outer steps travel: -buffer) or the previous outer update."""
        self.theta_k = self.theta.clone()
        if not self.bias:
            return
        if self.bias_form == "update":
            if self.prev_update is not None:
                self.theta.add_(self.prev_update, alpha=self.bias)
        elif (buf := self.momentum_buffer) is not None:
            self.theta.sub_(buf, alpha=self.bias)
        if self.grad_from == "start":
            self.start = self.theta.clone()

    @torch.no_grad()
    def end(self, stats: Mapping[str, float]) -> dict[str, float]:
        """After the inner epochs: apply the outer step; returns ``outer/`` diagnostics (the update's
        ``stats`` are not needed)."""
        assert self.theta_k is not None, "OuterStep.end() without begin()"
        theta_star = self.theta.clone()
        grad = (self.theta_k if self.start is None else self.start) - theta_star
        self.delta.zero_()
        self.delta.grad = grad.clone()
        self.optimizer.step()
        update = self.delta.detach()
        if self.start is None:  # theta_k - sigma d, from whichever end is closer (see the class)
            from_k, from_star = self.theta_k + update, theta_star + (grad + update)
            self.theta.copy_(torch.where(update.abs() <= (grad + update).abs(), from_k, from_star))
        else:
            self.theta.copy_(self.theta_k + update)
        stats = {"outer/grad_norm": float(grad.norm()), "outer/update_norm": float(update.norm())}
        if self.prev_grad is not None:
            stats["outer/grad_cosine"] = float(torch.nn.functional.cosine_similarity(grad, self.prev_grad, dim=0))
        self.prev_grad = grad
        if self.bias_form == "update":
            self.prev_update = update.clone()
        self.theta_k = self.start = None
        return stats

    def state(self) -> VariantState:
        """The outer optimizer's state (e.g. ``momentum_buffer``) and the last outer gradient."""
        out = {k: v for k, v in self.optimizer.state.get(self.delta, {}).items() if torch.is_tensor(v)}
        if self.prev_grad is not None:
            out["prev_grad"] = self.prev_grad
        if self.prev_update is not None:
            out["prev_update"] = self.prev_update
        return VariantState(out, None)

    def load_state(self, state: VariantState) -> None:
        """Inverse of :meth:`state`: every tensor is a finite vector the size of theta (else a ``ValueError``)."""
        for k, v in state.tensors.items():
            if v.shape != self.delta.shape or v.dtype != self.delta.dtype or not bool(torch.isfinite(v).all()):
                raise ValueError(f"Outer-PPO's {k} is {v.dtype} of shape {list(v.shape)} (or not finite); theta "
                                 f"is {self.delta.dtype} of shape {list(self.delta.shape)}")
        tensors = {k: v.to(self.delta.device) for k, v in state.tensors.items()}
        prev_grad = tensors.pop("prev_grad", None)
        self.prev_update = tensors.pop("prev_update", None)
        if tensors:
            self.optimizer.state[self.delta] = tensors
        if prev_grad is not None:
            self.prev_grad = prev_grad


def build(options: OuterOptions, ctx: PlugContext) -> Plug:
    """The same hook for every trainer: it only needs the flat parameter vector."""
    return Plug(hooks=(OuterStep.from_options(options, ctx.flat),))


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

register_variant(Variant("outer", OuterOptions, label, builders={"gym": build, "rlhf": build}, presets=PRESETS))
