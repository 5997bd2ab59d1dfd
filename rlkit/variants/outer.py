"""Outer-PPO (Tan et al. 2024, "Beyond the Boundaries of PPO", arXiv 2411.00666).

PPO's inner epochs (ordinary PPO with its own persistent Adam) move the parameters from the
inner starting point to theta*_k. The outer gradient is ``g_k = theta_k - theta*_k`` and an outer
optimizer applies it to theta_k: ``theta_{k+1} = theta_k - sigma * step(g_k)`` (plain, momentum or
Nesterov as in ``torch.optim.SGD``, or any torch optimizer). Plain PPO is sigma = 1, mu = 0.
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import nn

from rlkit.core.optim import FlatParameters
from rlkit.variants.base import UpdateHook, VariantState
from rlkit.variants.outer_options import OuterOptions
from rlkit.variants.registry import Plug, PlugContext


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


__all__ = ["OuterOptions", "OuterStep", "build"]
