"""``K`` actor and critic MLPs (Linear/Tanh stacks whose parameters are stacked on a leading axis)
as one autograd node: the fast twin of a plain batched forward (autograd through ``baddbmm`` and
``tanh``).

Why: as for one model (:mod:`rlkit.fast.mlp`), a PPO minibatch step of a small MLP is dominated by
per-op cost: autograd recording, a backward node per op and a gradient accumulation per parameter.
This node runs both stacks forward, writes every model's weight and bias gradients into one
``[K, P]`` buffer laid out as theta, and hands autograd that single tensor.

On the CPU (float32) the node is numpy throughout, on numpy views of theta and of the gradient
buffer made once: numpy's stacked matmul is a loop of one GEMM per row of the leading axis (row
k's numbers do not depend on ``K``), and a numpy op costs a fraction of a torch op's Python
overhead. Elsewhere (CUDA) every product is torch's batched matmul, with a width of 1 (a
one-dimensional observation, a one-row minibatch) padded with zeros to 2: torch takes a
matrix-vector path for a single row or column, whose numbers for row k depend on ``K``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch.nn import functional as F

_tanh_backward = torch.ops.aten.tanh_backward


class StackedLayer(NamedTuple):
    """One linear layer of every model, as views of theta ``[K, P]`` and of the gradient buffer."""

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


def _bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a [K, m, n] @ b [K, n, p]`` as torch's batched matmul, a width of 1 (m, n or p) padded to 2
    (the pad is cut off)."""
    m, p = a.shape[1], b.shape[2]
    a, b = _pad_out(a, 1), _pad_out(b, 2)
    if a.shape[2] == 1:
        a, b = F.pad(a, (0, 1)), F.pad(b, (0, 0, 0, 1))
    return torch.bmm(a, b)[:, :m, :p]


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x [K, B, in] @ weight [K, out, in]^T + bias [K, 1, out]``: one ``baddbmm`` (as a plain
    batched forward), or :func:`_bmm` and the bias where a width is 1."""
    if x.shape[1] == 1 or 1 in weight.shape[1:]:
        return _bmm(x, weight.transpose(1, 2)) + bias
    return torch.baddbmm(bias, x, weight.transpose(1, 2))


class NumpyLayer(NamedTuple):
    """One linear layer of every model for the numpy node: numpy views of theta and of the gradient
    buffer for the products, torch views for the elementwise and reduction ops around them."""

    weight: np.ndarray
    """``[K, out, in]``."""
    weight_t: np.ndarray
    """``[K, in, out]``, the transposed view."""
    staged: np.ndarray | None
    """``[K, in, out]`` C-contiguous, where the transposed weight is copied before the forward
    product (layers :data:`STAGED_FROM` wide or wider), else None."""
    bias: torch.Tensor
    """``[K, 1, out]``."""
    grad_weight: np.ndarray
    grad_bias: torch.Tensor


STAGED_FROM = 16
"""Layers this many outputs wide or wider multiply by a C-contiguous ``[in, out]`` copy of their
transposed weight: single-threaded OpenBLAS multiplies ``x [B, in]`` by a contiguous matrix faster
than by a transposed view, the copy included; for a few outputs the copy costs more than it saves.
The two layouts can round differently (over a few rows OpenBLAS multiplies them with other
kernels), so the choice follows the layer's width alone, never ``K``: row k's bits do not depend on
how many models are stacked."""


def _numpy_layer(layer: StackedLayer) -> NumpyLayer:
    weight = layer.weight.numpy()
    k, out, inp = weight.shape
    staged = np.empty((k, inp, out), np.float32) if out >= STAGED_FROM else None
    return NumpyLayer(weight, weight.transpose(0, 2, 1), staged, layer.bias, layer.grad_weight.numpy(), layer.grad_bias)


def numpy_forward(layers: list[NumpyLayer], x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """``x [K, B, in]`` (C-contiguous float32) through tanh hidden layers; returns the output
    ``[K, B, out]`` and each layer's input. The products are numpy's (a wide layer's on its staged
    weight, :data:`STAGED_FROM`), the bias add torch's (an in-place broadcast add, cheaper than
    numpy's) and the tanh numpy's (cheaper than torch's on the CPU, as in :mod:`rlkit.fast.mlp`)."""
    inputs = [x]
    for i, layer in enumerate(layers):
        if layer.staged is not None:
            np.copyto(layer.staged, layer.weight_t)
        y = np.matmul(x, layer.weight_t if layer.staged is None else layer.staged)
        torch.from_numpy(y).add_(layer.bias)
        if i == len(layers) - 1:
            return y, inputs
        np.tanh(y, out=y)
        inputs.append(y)
        x = y
    raise ValueError("an MLP needs at least one layer")


def numpy_backward(layers: list[NumpyLayer], inputs: list[np.ndarray], g: np.ndarray) -> None:
    """Every model's weight and bias gradients of ``layers`` for the output gradient ``g [K, B, out]``
    (C-contiguous), written into the layers' gradient views: the products in numpy, the bias sums
    and tanh's derivative in torch (one fused pass each, where numpy makes several)."""
    for i in range(len(layers) - 1, -1, -1):
        layer = layers[i]
        np.matmul(g.transpose(0, 2, 1), inputs[i], out=layer.grad_weight)
        torch.sum(torch.from_numpy(g), 1, keepdim=True, out=layer.grad_bias)
        if i:
            # With one output (the critic's) the product is an outer product: a broadcast multiply
            # forms each element as the GEMM does (one product each), for less than a depth-1 GEMM costs.
            back = np.multiply(g, layer.weight) if g.shape[2] == 1 else np.matmul(g, layer.weight)
            g = _tanh_backward(torch.from_numpy(back), torch.from_numpy(inputs[i])).numpy()


class Saved(NamedTuple):
    """What the node's backward needs of its forward: each stack's layer inputs."""

    actor: list
    """Each actor layer's input (numpy arrays, or torch tensors on the torch path)."""
    critic: list
    numpy: bool
    """Whether the forward ran in numpy (:func:`numpy_forward`)."""


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

        self.spec = actor, critic
        self.actor, self.critic = layers(actor), layers(critic)
        self.numpy = theta.device.type == "cpu" and theta.dtype == torch.float32
        """The node in numpy (:func:`numpy_forward`, :func:`numpy_backward`), on these views."""
        self.numpy_actor = [_numpy_layer(layer) for layer in self.actor] if self.numpy else []
        self.numpy_critic = [_numpy_layer(layer) for layer in self.critic] if self.numpy else []

    def numpy_layers(self, grad: torch.Tensor) -> tuple[list[NumpyLayer], list[NumpyLayer]]:
        """The actor's and critic's numpy layers (CPU float32 only) with their gradients written into
        ``grad [K, P]`` (laid out as theta) instead of the node's own buffer."""
        k = self.theta.shape[0]
        stacks = self.numpy_actor, self.numpy_critic
        return tuple([NumpyLayer(own.weight, own.weight_t, own.staged, own.bias, grad[:, w].view(k, *shape).numpy(),
                                 grad[:, b].view(k, 1, shape[0]))
                      for own, (w, b, shape) in zip(layers, spec)]
                     for layers, spec in zip(stacks, self.spec))  # type: ignore[return-value]

    def run(self, layers: list[StackedLayer], x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """``x [K, B, in]`` forward through tanh hidden layers in torch; returns the output and each
        layer's input."""
        inputs = [x]
        for i, layer in enumerate(layers):
            x = _linear(x, layer.weight, layer.bias)
            if i == len(layers) - 1:
                return x, inputs
            x.tanh_()
            inputs.append(x)
        raise ValueError("an MLP needs at least one layer")

    def __call__(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs [K, B, obs_dim]`` -> (actor output ``[K, B, out_dim]``, values ``[K, B]``)."""
        return _StackedFunction.apply(obs, self.theta, self)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Saved]:
        """Both stacks on ``obs [K, B, obs_dim]``: outputs and what the backward needs."""
        if self.numpy and obs.dtype == torch.float32:
            x = np.ascontiguousarray(obs.detach().numpy())
            params, actor_inputs = numpy_forward(self.numpy_actor, x)
            values, critic_inputs = numpy_forward(self.numpy_critic, x)
            return torch.from_numpy(params), torch.from_numpy(values[..., 0]), Saved(actor_inputs, critic_inputs, True)
        params, actor_inputs = self.run(self.actor, obs)
        values, critic_inputs = self.run(self.critic, obs)
        return params, values[..., 0], Saved(actor_inputs, critic_inputs, False)

    def backward(self, g_params: torch.Tensor, g_values: torch.Tensor, inputs: Saved) -> torch.Tensor:
        """Every model's gradient, written into the ``[K, P]`` buffer; returns a copy of it."""
        if inputs.numpy:
            numpy_backward(self.numpy_actor, inputs.actor, np.ascontiguousarray(g_params.numpy()))
            numpy_backward(self.numpy_critic, inputs.critic, np.ascontiguousarray(g_values.numpy()[..., None]))
            return self.grad.clone()
        for layers, xs, g in ((self.actor, inputs.actor, g_params), (self.critic, inputs.critic, g_values[..., None])):
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
        params, values, inputs = plan.forward(obs)
        ctx.plan, ctx.inputs = plan, inputs
        return params, values

    @staticmethod
    def backward(ctx, g_params: torch.Tensor, g_values: torch.Tensor):
        grad = ctx.plan.backward(g_params, g_values, ctx.inputs)
        ctx.inputs = None
        return None, grad, None
