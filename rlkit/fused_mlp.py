"""The actor and critic MLPs of :class:`~rlkit.policies.MLPActorCritic` as one autograd node.

Why (issue #2, profiled): with minibatches of 64-128 transitions the matrix products are a
few microseconds each and a PPO step was dominated by per-op cost: autograd recording,
backward nodes, one gradient accumulation per parameter, and ``torch.tanh``, which on this
CPU build costs ~20 us for a 128x64 tensor where numpy's takes ~2 us. This node runs both
MLPs forward with the tanh in numpy (CPU, float32), writes every weight and bias gradient
with ``out=`` into one flat gradient, and hands autograd that single tensor for the flat
parameter vector of :class:`~rlkit.optim.FlatParameters`.

The math is the ordinary backward pass of ``y = W2 tanh(W1 tanh(W0 x + b0) + b1) + b2``; it
is tested against autograd through the plain modules (tests/test_components.py).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

_tanh_backward = torch.ops.aten.tanh_backward


class Layer(NamedTuple):
    weight: nn.Parameter
    """``[out, in]``, a view into the flat parameter vector."""
    bias: nn.Parameter
    weight_slice: slice
    """Where the weight's gradient lives in the flat gradient."""
    bias_slice: slice


def _tanh_(h: torch.Tensor) -> torch.Tensor:
    if h.device.type == "cpu" and h.dtype == torch.float32:
        a = h.numpy()
        np.tanh(a, out=a)
        return h
    return h.tanh_()


def _run(layers: list[Layer], x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Forward through tanh hidden layers; returns the output and the layer inputs."""
    inputs = [x]
    h = x
    for i, layer in enumerate(layers):
        h = torch.addmm(layer.bias, h, layer.weight.t())
        if i < len(layers) - 1:
            h = _tanh_(h)
            inputs.append(h)
    return h, inputs


class FusedActorCritic:
    """Plan for running ``actor`` and ``critic`` (``nn.Sequential`` of Linear/Tanh) as one node.

    ``flat_param`` is the :class:`~rlkit.optim.FlatParameters` vector the modules' parameters are
    views of; ``slices`` maps each parameter (by identity) to its range in it.
    """

    def __init__(self, actor: nn.Sequential, critic: nn.Sequential, flat_param: nn.Parameter,
                 slices: dict[int, slice]) -> None:
        def layers(seq: nn.Sequential) -> list[Layer]:
            out = []
            for m in seq:
                if isinstance(m, nn.Linear):
                    out.append(Layer(m.weight, m.bias, slices[id(m.weight)], slices[id(m.bias)]))
                elif not isinstance(m, nn.Tanh):
                    raise TypeError(f"FusedActorCritic supports Linear and Tanh layers, got {type(m).__name__}")
            return out

        self.actor, self.critic = layers(actor), layers(critic)
        self.flat_param = flat_param

    def __call__(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs [B, obs_dim]`` -> (actor output ``[B, out_dim]``, values ``[B]``)."""
        return _ActorCriticFunction.apply(obs, self.flat_param, self)


class _ActorCriticFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, obs: torch.Tensor, flat_param: torch.Tensor, plan: FusedActorCritic):
        params, actor_inputs = _run(plan.actor, obs)
        values, critic_inputs = _run(plan.critic, obs)
        ctx.plan, ctx.inputs = plan, (actor_inputs, critic_inputs)
        ctx.shape = (flat_param.numel(), flat_param.dtype, flat_param.device)
        return params, values[:, 0]

    @staticmethod
    def backward(ctx, g_params: torch.Tensor, g_values: torch.Tensor):
        numel, dtype, device = ctx.shape
        # Zeros where no layer writes (a Gaussian head's log-std gets its gradient through the head).
        grad = torch.zeros(numel, dtype=dtype, device=device)
        plan = ctx.plan
        for layers, inputs, g in ((plan.actor, ctx.inputs[0], g_params), (plan.critic, ctx.inputs[1], g_values[:, None])):
            for i in range(len(layers) - 1, -1, -1):
                layer = layers[i]
                torch.mm(g.t(), inputs[i], out=grad[layer.weight_slice].view(layer.weight.shape))
                torch.sum(g, 0, out=grad[layer.bias_slice])
                if i:
                    g = _tanh_backward(g.mm(layer.weight), inputs[i])
        ctx.inputs = None
        return None, grad, None
