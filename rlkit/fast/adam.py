"""Adam over the single flat parameter, stepped by calling torch's fused Adam kernel directly.

``torch.optim.Optimizer.step`` wraps every call in profiling hooks and generic grouping code:
~60 us of Python per step on CPU around a ~7 us kernel (profiled); with one parameter there is
nothing to group. The state lives in a real ``torch.optim.Adam`` (``fused=True``), so
``state`` and ``param_groups`` are Adam's own, and the first step (which builds the state)
goes through it. Bit-identical to ``Adam.step`` (tested). The kernel is a private torch API:
where a torch build lacks it, every step goes through ``Adam.step``.
"""

from __future__ import annotations

import torch

from rlkit.core.optim import FlatParameters, make_adam

_FUSED_ADAM = getattr(torch, "_fused_adam_", None)


class FlatAdam:
    """:func:`rlkit.core.optim.make_adam`'s optimizer with a direct kernel call per step."""

    def __init__(self, flat: FlatParameters, lr: float, eps: float = 1e-5) -> None:
        self.adam = make_adam(flat, lr, eps)
        self.param = flat.param

    @property
    def param_groups(self) -> list[dict]:
        return self.adam.param_groups

    @property
    def state(self) -> dict:
        return self.adam.state

    def step(self) -> None:
        group, param = self.adam.param_groups[0], self.param
        state = self.adam.state.get(param)
        if (_FUSED_ADAM is None or not state or param.grad is None or not group["fused"]
                or isinstance(group["lr"], torch.Tensor)):
            self.adam.step()
            return
        beta1, beta2 = group["betas"]
        state["step"].add_(1)
        _FUSED_ADAM([param], [param.grad], [state["exp_avg"]], [state["exp_avg_sq"]], [], [state["step"]],
                    amsgrad=group["amsgrad"], lr=group["lr"], beta1=beta1, beta2=beta2,
                    weight_decay=group["weight_decay"], eps=group["eps"], maximize=group["maximize"],
                    grad_scale=None, found_inf=None)
