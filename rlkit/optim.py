"""One flat parameter vector for a module, so clipping and Adam are single ops.

Every parameter becomes a view into one contiguous buffer, and its ``.grad`` a view into a
second one; autograd accumulates into those views in place. Gradient-norm clipping is then
one norm and one multiply, Adam runs on one tensor, and Outer-PPO (issue #3) reads the
parameters as the vector theta directly. Actor parameters come first, so "actor only"
is a prefix slice.
"""

from __future__ import annotations

import torch
from torch import nn


class FlatParameters:
    """Views ``params`` (in order) into ``self.param`` (data) and ``self.param.grad``."""

    def __init__(self, params: list[nn.Parameter], split: int | None = None) -> None:
        if not params:
            raise ValueError("FlatParameters needs at least one parameter")
        device, dtype = params[0].device, params[0].dtype
        total = sum(p.numel() for p in params)
        data = torch.empty(total, device=device, dtype=dtype)
        grad = torch.zeros(total, device=device, dtype=dtype)
        self.slices: list[slice] = []
        offset = 0
        for p in params:
            n = p.numel()
            data[offset:offset + n].copy_(p.data.reshape(-1))
            p.data = data[offset:offset + n].view_as(p)
            p.grad = grad[offset:offset + n].view_as(p)
            self.slices.append(slice(offset, offset + n))
            offset += n
        self.param = nn.Parameter(data)
        self.param.grad = grad
        self.params = params
        self.split = total if split is None else split
        """Number of leading entries that belong to the actor (the rest is the critic)."""

    @property
    def data(self) -> torch.Tensor:
        """``[P]`` the parameter vector theta (writes are seen by the module)."""
        return self.param.data

    @property
    def grad(self) -> torch.Tensor:
        assert self.param.grad is not None
        return self.param.grad

    def zero_grad(self) -> None:
        self.grad.zero_()

    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """Scale the gradient to global norm ``max_norm`` at most (as ``nn.utils.clip_grad_norm_``);
        returns the norm before clipping."""
        norm = torch.linalg.vector_norm(self.grad)
        self.grad.mul_((max_norm / (norm + 1e-6)).clamp(max=1.0))
        return norm


class FlatAdam(torch.optim.Adam):
    """``torch.optim.Adam(fused=True)`` over the single flat parameter, stepped by calling its
    fused kernel directly.

    The generic ``Optimizer.step`` machinery costs ~60 us of Python per call on CPU around a
    ~7 us kernel (profiled, issue #2); with one parameter there is nothing for it to group.
    State, ``state_dict`` and ``param_groups`` are Adam's own; the first step (which builds the
    state) and any configuration this fast path does not cover go through ``Adam.step``.
    Bit-identical to ``Adam.step`` (tested).
    """

    def step(self, closure=None):  # type: ignore[override]
        group = self.param_groups[0]
        param = group["params"][0]
        state = self.state.get(param)
        if (closure is not None or not state or len(self.param_groups) > 1 or len(group["params"]) > 1
                or param.grad is None or not group["fused"] or group["amsgrad"] or group["maximize"]
                or group.get("decoupled_weight_decay", False) or isinstance(group["lr"], torch.Tensor)):
            return super().step(closure)
        beta1, beta2 = group["betas"]
        state["step"].add_(1)
        torch._fused_adam_([param], [param.grad], [state["exp_avg"]], [state["exp_avg_sq"]], [], [state["step"]],
                           amsgrad=False, lr=group["lr"], beta1=beta1, beta2=beta2,
                           weight_decay=group["weight_decay"], eps=group["eps"], maximize=False,
                           grad_scale=None, found_inf=None)
        return None


def make_adam(flat: FlatParameters, lr: float) -> torch.optim.Adam:
    """Adam with eps 1e-5 (PPO implementation detail) over the single flat parameter."""
    return FlatAdam([flat.param], lr=lr, eps=1e-5, fused=True)
