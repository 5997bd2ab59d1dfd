"""One flat parameter vector for a module, so clipping and Adam are single ops.

Every parameter becomes a view into one contiguous buffer, and its ``.grad`` a view into a
second one; autograd accumulates into those views in place. Gradient-norm clipping is then
one norm and one multiply, Adam runs on one tensor, and Outer-PPO reads the parameters as
the vector theta directly. Actor parameters come first, so "actor only" is a prefix slice.
"""

from __future__ import annotations

from typing import Protocol

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

    def move_to(self, data: torch.Tensor, grad: torch.Tensor) -> None:
        """Keep theta in ``data`` and its gradient in ``grad`` (each ``[P]``, e.g. one row of
        ``[K, P]`` matrices that stack several models' parameters) from now on: theta is copied
        there, the gradient zeroed, and every parameter becomes a view of them. The optimizer's state is keyed by
        ``self.param``, which stays the same object."""
        data.copy_(self.data)
        grad.zero_()
        self.param.data = data
        self.param.grad = grad
        for p, part in zip(self.params, self.slices):
            p.data = data[part].view_as(p)
            p.grad = grad[part].view_as(p)

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


class Optimizer(Protocol):
    """What the update needs of an optimizer over the flat parameter (``torch.optim.Adam`` or
    :class:`rlkit.fast.adam.FlatAdam`)."""

    param_groups: list[dict]
    state: dict

    def step(self) -> None: ...


def make_adam(flat: FlatParameters, lr: float, eps: float = 1e-5) -> torch.optim.Adam:
    """Adam over the single flat parameter, eps 1e-5 by default (a PPO implementation detail);
    torch's fused kernel on CPU and CUDA."""
    return torch.optim.Adam([flat.param], lr=lr, eps=eps, fused=flat.param.device.type in ("cpu", "cuda"))


def adam_state(optimizer: Optimizer, param: torch.Tensor) -> dict[str, torch.Tensor]:
    """Adam's per-parameter state (``step``, ``exp_avg``, ``exp_avg_sq``) for a checkpoint."""
    return {k: v for k, v in optimizer.state.get(param, {}).items() if torch.is_tensor(v)}


def restore_adam_state(optimizer: Optimizer, param: torch.Tensor, tensors: dict[str, torch.Tensor]) -> None:
    """Adam's per-parameter state from a checkpoint loaded on the CPU: the moments go to the
    parameter's device, and so does ``step`` when the kernel is fused (torch's fused Adam wants
    it there; the unfused one keeps it on CPU). State that does not fit ``param`` (a moment of
    another shape or dtype, a missing key, a step that is no count) is a ``ValueError`` naming it."""
    if not tensors:
        return
    _check_adam_state(param, tensors)
    group = optimizer.param_groups[0]
    on_device = group["fused"] or group["capturable"]
    optimizer.state[param] = {k: v.to(param.device) if k != "step" or on_device else v.cpu()
                              for k, v in tensors.items()}


def _check_adam_state(param: torch.Tensor, tensors: dict[str, torch.Tensor]) -> None:
    missing = [k for k in ("step", "exp_avg", "exp_avg_sq") if k not in tensors]
    if missing:
        raise ValueError(f"Adam's state lacks {', '.join(missing)}")
    for name in ("exp_avg", "exp_avg_sq"):
        moment = tensors[name]
        if moment.shape != param.shape or moment.dtype != param.dtype:
            raise ValueError(f"Adam's {name} is {moment.dtype} of shape {list(moment.shape)}; the parameters are "
                             f"{param.dtype} of shape {list(param.shape)}")
        if not bool(torch.isfinite(moment).all()):
            raise ValueError(f"Adam's {name} holds non-finite values")
    if bool((tensors["exp_avg_sq"] < 0).any()):
        raise ValueError("Adam's exp_avg_sq holds negative values (it is a running mean of squares)")
    step = tensors["step"]
    # A float32 count is exact up to 2**24 (torch keeps Adam's step in float32); a stored state has
    # taken at least one step.
    if step.dim() != 0 or step.dtype not in (torch.float32, torch.float64) or not (
            1 <= float(step) <= 2 ** 24 and float(step).is_integer()):
        raise ValueError(f"Adam's step is not a count of steps taken: {step.dtype} {step.tolist()}")
