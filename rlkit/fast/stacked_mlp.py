"""A population's actor and critic MLPs (``K`` members' Linear/Tanh stacks, parameters stacked on a
leading member axis) as one autograd node: the fast twin of the plain batched forward
(:class:`rlkit.gym.stacked.StackedParameters`, autograd through ``baddbmm`` and ``tanh``).

Why: as for one member (:mod:`rlkit.fast.mlp`), a PPO minibatch step of a small MLP is dominated by
per-op cost: autograd recording, a backward node per op and a gradient accumulation per parameter.
This node runs both stacks forward (tanh in numpy on the CPU), writes every member's weight and bias
gradients into one ``[K, P]`` buffer laid out as theta, and hands autograd that single tensor.

Every product is a batched matmul with one matrix product per member, so a member's numbers do not
depend on ``K``. Narrow products (a few output columns: a critic's single value, a policy's few
logits, the first layer's weight gradient) run as numpy's matmul, a loop of one GEMM per member. In
torch's batched matmul a width of 1 (a one-dimensional observation, a one-row minibatch) is padded
with zeros to 2 as :func:`rlkit.gym.stacked.stacked_linear` does it: torch takes a matrix-vector
path for a single row or column, whose numbers for a member depend on ``K``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch.nn import functional as F

_tanh_backward = torch.ops.aten.tanh_backward


class StackedLayer(NamedTuple):
    """One linear layer of every member, as views of theta ``[K, P]`` and of the gradient buffer."""

    weight: torch.Tensor
    """``[K, out, in]``."""
    bias: torch.Tensor
    """``[K, 1, out]``."""
    grad_weight: torch.Tensor
    grad_bias: torch.Tensor


def _pad_out(t: torch.Tensor, dim: int) -> torch.Tensor:
    """``t`` with a zero appended along ``dim`` where that size is 1 (see the module docstring)."""
    if t.shape[dim] != 1:
        return t
    pad = [0, 0] * (t.dim() - 1 - dim % t.dim()) + [0, 1]
    return F.pad(t, pad)


_NUMPY_WIDTH = 4
"""Products with at most this many output columns (or a single row) run as numpy's stacked matmul
on the CPU (a loop of one small GEMM per member, 2-3x faster than torch's batched kernel for 5-10
members at these widths, measured; as fast for one member), unless they contract a single column
(an outer product, slow in numpy). The choice depends on the shapes alone, never on ``K``."""


def _bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a [K, m, n] @ b [K, n, p]``: numpy's for a narrow ``p`` or a single row; else torch's with a
    width of 1 (m, n or p) padded to 2 (the pad is cut off)."""
    m, n, p = a.shape[1], a.shape[2], b.shape[2]
    if (p <= _NUMPY_WIDTH or m == 1) and n > 1 and a.device.type == "cpu":  # numpy's GEMM loop: no padding
        return torch.from_numpy(np.matmul(a.numpy(), b.numpy()))
    a, b = _pad_out(a, 1), _pad_out(b, 2)
    if a.shape[2] == 1:
        a, b = F.pad(a, (0, 1)), F.pad(b, (0, 0, 0, 1))
    return torch.bmm(a, b)[:, :m, :p]


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x [K, B, in] @ weight [K, out, in]^T + bias [K, 1, out]``: one ``baddbmm`` (as the plain
    :func:`rlkit.gym.stacked.stacked_linear`), or :func:`_bmm` and the bias where a width is 1 or
    the output is narrow."""
    if x.shape[1] == 1 or 1 in weight.shape[1:] or weight.shape[1] <= _NUMPY_WIDTH:
        return _bmm(x, weight.transpose(1, 2)) + bias
    return torch.baddbmm(bias, x, weight.transpose(1, 2))


class StackedFusedMLP:
    """``theta [K, P]`` (a leaf) and where each layer lives in it: ``actor`` and ``critic`` are
    lists of ``(weight slice, bias slice, (out, in))``."""

    def __init__(self, theta: torch.Tensor, actor: list[tuple[slice, slice, tuple[int, int]]],
                 critic: list[tuple[slice, slice, tuple[int, int]]]) -> None:
        self.theta = theta
        self.grad = torch.zeros_like(theta.data)
        k = theta.shape[0]

        def layers(spec: list[tuple[slice, slice, tuple[int, int]]]) -> list[StackedLayer]:
            return [StackedLayer(theta.data[:, w].view(k, *shape), theta.data[:, b].view(k, 1, shape[0]),
                                 self.grad[:, w].view(k, *shape), self.grad[:, b].view(k, 1, shape[0]))
                    for w, b, shape in spec]

        self.actor, self.critic = layers(actor), layers(critic)
        self.numpy_tanh = theta.device.type == "cpu" and theta.dtype == torch.float32

    def run(self, layers: list[StackedLayer], x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """``x [K, B, in]`` forward through tanh hidden layers; returns the output and each layer's input."""
        inputs = [x]
        for i, layer in enumerate(layers):
            x = _linear(x, layer.weight, layer.bias)
            if i == len(layers) - 1:
                return x, inputs
            if self.numpy_tanh:
                a = x.numpy()
                np.tanh(a, out=a)
            else:
                x.tanh_()
            inputs.append(x)
        raise ValueError("an MLP needs at least one layer")

    def __call__(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs [K, B, obs_dim]`` -> (actor output ``[K, B, out_dim]``, values ``[K, B]``)."""
        return _StackedFunction.apply(obs, self.theta, self)

    def backward(self, g_params: torch.Tensor, g_values: torch.Tensor, inputs: tuple[list, list]) -> torch.Tensor:
        """Every member's gradient, written into the ``[K, P]`` buffer; returns a copy of it."""
        for layers, xs, g in ((self.actor, inputs[0], g_params), (self.critic, inputs[1], g_values[..., None])):
            for i in range(len(layers) - 1, -1, -1):
                layer = layers[i]
                layer.grad_weight.copy_(_bmm(g.transpose(1, 2), xs[i]))
                torch.sum(g, 1, keepdim=True, out=layer.grad_bias)
                if i:
                    g = _tanh_backward(_bmm(g, layer.weight), xs[i])
        return self.grad.clone()


class _StackedFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, obs: torch.Tensor, theta: torch.Tensor, plan: StackedFusedMLP):
        params, actor_inputs = plan.run(plan.actor, obs)
        values, critic_inputs = plan.run(plan.critic, obs)
        ctx.plan, ctx.inputs = plan, (actor_inputs, critic_inputs)
        return params, values[..., 0]

    @staticmethod
    def backward(ctx, g_params: torch.Tensor, g_values: torch.Tensor):
        grad = ctx.plan.backward(g_params, g_values, ctx.inputs)
        ctx.inputs = None
        return None, grad, None
