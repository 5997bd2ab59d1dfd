"""Adam over the single flat parameter, stepped by calling torch's fused Adam kernel directly.

``torch.optim.Optimizer.step`` wraps every call in profiling hooks and generic grouping code,
several times the kernel's own time in Python on the CPU; with one parameter there is nothing to
group. The state lives in a real ``torch.optim.Adam`` (``fused=True``), so
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


class AdamsTogether:
    """Several :class:`FlatAdam` optimizers (one per model, with the same settings) stepped by one
    fused-kernel call: the kernel updates each parameter on its own, so each gets the bits of its
    own ``step()``. Made with :meth:`of` for a stretch of steps in which the optimizers' settings do
    not change (an epoch); their step counters advance in one call too."""

    def __init__(self, optimizers: list[FlatAdam], states: list[dict]) -> None:
        first = optimizers[0].adam.param_groups[0]
        self.params = [o.param for o in optimizers]
        self.grads = [o.param.grad for o in optimizers]
        self.exp_avgs = [s["exp_avg"] for s in states]
        self.exp_avg_sqs = [s["exp_avg_sq"] for s in states]
        self.steps = [s["step"] for s in states]
        beta1, beta2 = first["betas"]
        self.options = dict(amsgrad=first["amsgrad"], lr=first["lr"], beta1=beta1, beta2=beta2,
                            weight_decay=first["weight_decay"], eps=first["eps"], maximize=first["maximize"],
                            grad_scale=None, found_inf=None)

    @classmethod
    def of(cls, optimizers: list[object]) -> AdamsTogether | None:
        """None where one call does not apply (another optimizer, no state yet, a tensor or
        differing learning rate or other setting, no gradient, no kernel): step them one by one."""
        if _FUSED_ADAM is None or not optimizers or not all(isinstance(o, FlatAdam) for o in optimizers):
            return None
        adams: list[FlatAdam] = optimizers  # type: ignore[assignment]
        groups = [o.adam.param_groups[0] for o in adams]
        states = [o.adam.state.get(o.param) for o in adams]
        first = groups[0]
        keys = ("lr", "betas", "weight_decay", "eps", "amsgrad", "maximize")
        if (not all(states) or any(not g["fused"] or isinstance(g["lr"], torch.Tensor) for g in groups)
                or any(any(g[k] != first[k] for k in keys) for g in groups)
                or any(o.param.grad is None for o in adams)):
            return None
        return cls(adams, states)  # type: ignore[arg-type]

    def step(self) -> None:
        torch._foreach_add_(self.steps, 1)
        _FUSED_ADAM(self.params, self.grads, self.exp_avgs, self.exp_avg_sqs, [], self.steps, **self.options)

