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


class FlatAdam:
    """Adam (eps 1e-5 in rlkit) over the single flat parameter, stepped by calling torch's fused
    Adam kernel directly.

    ``torch.optim.Optimizer.step`` wraps every call in profiling hooks and generic grouping code:
    ~60 us of Python per step on CPU around a ~7 us kernel (profiled, issue #2); with one
    parameter there is nothing to group. The state lives in a real ``torch.optim.Adam``
    (``fused=True``), so ``state``, ``param_groups`` and ``state_dict`` are Adam's own, and the
    first step (which builds the state) goes through it. Bit-identical to ``Adam.step`` (tested).
    """

    def __init__(self, param: torch.nn.Parameter, lr: float, eps: float = 1e-5) -> None:
        self.adam = torch.optim.Adam([param], lr=lr, eps=eps, fused=param.device.type in ("cpu", "cuda"))
        self.param = param

    @property
    def param_groups(self) -> list[dict]:
        return self.adam.param_groups

    @property
    def state(self) -> dict:
        return self.adam.state

    def state_dict(self) -> dict:
        return self.adam.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.adam.load_state_dict(state)

    def restore_state(self, tensors: dict[str, torch.Tensor]) -> None:
        """Adam's per-parameter state (``step``, ``exp_avg``, ``exp_avg_sq``) from a checkpoint
        loaded on the CPU: the moments go to the parameter's device, and so does ``step`` when
        the kernel is fused (torch's fused Adam wants it there; the unfused one keeps it on CPU)."""
        if not tensors:
            return
        group = self.adam.param_groups[0]
        on_device = group["fused"] or group["capturable"]
        self.adam.state[self.param] = {k: v.to(self.param.device) if k != "step" or on_device else v.cpu()
                                       for k, v in tensors.items()}

    def step(self) -> None:
        group, param = self.adam.param_groups[0], self.param
        state = self.adam.state.get(param)
        if not state or param.grad is None or not group["fused"] or isinstance(group["lr"], torch.Tensor):
            self.adam.step()
            return
        beta1, beta2 = group["betas"]
        state["step"].add_(1)
        torch._fused_adam_([param], [param.grad], [state["exp_avg"]], [state["exp_avg_sq"]], [], [state["step"]],
                           amsgrad=group["amsgrad"], lr=group["lr"], beta1=beta1, beta2=beta2,
                           weight_decay=group["weight_decay"], eps=group["eps"], maximize=group["maximize"],
                           grad_scale=None, found_inf=None)


def make_adam(flat: FlatParameters, lr: float) -> FlatAdam:
    """Adam with eps 1e-5 (PPO implementation detail) over the single flat parameter."""
    return FlatAdam(flat.param, lr=lr, eps=1e-5)
