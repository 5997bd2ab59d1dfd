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


def step_together(optimizers: list[object]) -> bool:
    """Step several :class:`FlatAdam` optimizers (a population's members) in one fused-kernel call:
    the kernel updates each parameter on its own, so each gets the bits of its own ``step()``.
    Returns False, stepping none, where that does not apply (another optimizer, no state yet, a
    tensor or differing learning rate, no kernel): the caller steps them one by one."""
    if _FUSED_ADAM is None or not optimizers or not all(isinstance(o, FlatAdam) for o in optimizers):
        return False
    groups = [o.adam.param_groups[0] for o in optimizers]  # type: ignore[attr-defined]
    states = [o.adam.state.get(o.param) for o in optimizers]  # type: ignore[attr-defined]
    first = groups[0]
    keys = ("lr", "betas", "weight_decay", "eps", "amsgrad", "maximize")
    if (not all(states) or any(not g["fused"] or isinstance(g["lr"], torch.Tensor) for g in groups)
            or any(any(g[k] != first[k] for k in keys) for g in groups)
            or any(o.param.grad is None for o in optimizers)):  # type: ignore[attr-defined]
        return False
    for state in states:
        state["step"].add_(1)
    beta1, beta2 = first["betas"]
    _FUSED_ADAM([o.param for o in optimizers], [o.param.grad for o in optimizers],  # type: ignore[attr-defined]
                [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states], [], [s["step"] for s in states],
                amsgrad=first["amsgrad"], lr=first["lr"], beta1=beta1, beta2=beta2, weight_decay=first["weight_decay"],
                eps=first["eps"], maximize=first["maximize"], grad_scale=None, found_inf=None)
    return True
