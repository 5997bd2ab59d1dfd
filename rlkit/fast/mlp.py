"""A model's actor and critic MLPs (Linear/Tanh stacks, e.g. the gym trainer's policy) as one
autograd node, installed by :func:`install_fused_forward` in the model's ``forward_override``.

Why: with minibatches of 64-128 transitions the matrix products are small and a PPO step is
dominated by per-op cost: autograd recording, backward nodes, one gradient accumulation per
parameter, and ``torch.tanh``, which on the CPU costs several times numpy's at these sizes. This
node runs both MLPs forward with the tanh in numpy (CPU, float32), writes every weight and bias
gradient with ``out=`` into one flat gradient, and hands autograd that single tensor for the flat
parameter vector of :class:`~rlkit.core.optim.FlatParameters`.

The math is the ordinary backward pass of ``y = W2 tanh(W1 tanh(W0 x + b0) + b1) + b2``; it
is tested against autograd through the plain modules (tests/fast).
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Protocol

import numpy as np
import torch
from torch import nn

from rlkit.core.optim import FlatParameters

_tanh_backward = torch.ops.aten.tanh_backward


class ActorCriticMLP(Protocol):
    """What the fused node needs of a model: the two stacks, and the plug point it goes in."""

    actor: nn.Sequential
    """Linear/Tanh layers, ``[B, obs_dim] -> [B, out_dim]``."""
    critic: nn.Sequential
    """Linear/Tanh layers, ``[B, obs_dim] -> [B, 1]``."""
    forward_override: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None
    """Called by the model's ``forward`` in place of the modules when set: ``obs [B, obs_dim]`` ->
    (actor output ``[B, out_dim]``, values ``[B]``)."""


class Layer(NamedTuple):
    weight: torch.Tensor
    """``[out, in]``, a view into the flat parameter vector."""
    weight_t: torch.Tensor
    """``[in, out]`` its transposed view."""
    bias: torch.Tensor
    grad_weight: torch.Tensor
    """``[out, in]`` view of the plan's flat gradient buffer where this weight's gradient goes."""
    grad_bias: torch.Tensor


class FusedActorCritic:
    """Plan for running ``actor`` and ``critic`` (``nn.Sequential`` of Linear/Tanh) as one node.

    ``flat_param`` is the :class:`~rlkit.core.optim.FlatParameters` vector the modules' parameters are
    views of; ``slices`` maps each parameter (by identity) to its range in it. Weight views and
    gradient views are made once here (making them on every call would cost a share of a step).
    """

    def __init__(self, actor: nn.Sequential, critic: nn.Sequential, flat_param: nn.Parameter,
                 slices: dict[int, slice]) -> None:
        # One gradient buffer with fixed views, written by every backward and handed to autograd as a
        # copy (two calls in one graph must not share it). Entries no layer writes (a log-std) stay zero.
        self.grad = torch.zeros_like(flat_param.data)

        def layers(seq: nn.Sequential) -> list[Layer]:
            out = []
            for m in seq:
                if isinstance(m, nn.Linear):
                    gw = self.grad[slices[id(m.weight)]].view(m.weight.shape)
                    weight = m.weight.detach()
                    out.append(Layer(weight, weight.t(), m.bias.detach(), gw, self.grad[slices[id(m.bias)]]))
                elif not isinstance(m, nn.Tanh):
                    raise TypeError(f"FusedActorCritic supports Linear and Tanh layers, got {type(m).__name__}")
            return out

        self.actor, self.critic = layers(actor), layers(critic)
        self.flat_param = flat_param
        self.numpy_tanh = flat_param.device.type == "cpu" and flat_param.dtype == torch.float32

    def run(self, layers: list[Layer], x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Forward through tanh hidden layers; returns the output and each layer's input."""
        inputs = [x]
        for layer in layers[:-1]:
            x = torch.addmm(layer.bias, x, layer.weight_t)
            if self.numpy_tanh:  # in place, through numpy (see the module docstring)
                a = x.numpy()
                np.tanh(a, out=a)
            else:
                x.tanh_()
            inputs.append(x)
        last = layers[-1]
        return torch.addmm(last.bias, x, last.weight_t), inputs

    def __call__(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs [B, obs_dim]`` -> (actor output ``[B, out_dim]``, values ``[B]``)."""
        return _ActorCriticFunction.apply(obs, self.flat_param, self)


class _ActorCriticFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, obs: torch.Tensor, flat_param: torch.Tensor, plan: FusedActorCritic):
        params, actor_inputs = plan.run(plan.actor, obs)
        values, critic_inputs = plan.run(plan.critic, obs)
        ctx.plan, ctx.inputs = plan, (actor_inputs, critic_inputs)
        return params, values[:, 0]

    @staticmethod
    def backward(ctx, g_params: torch.Tensor, g_values: torch.Tensor):
        plan = ctx.plan
        for layers, inputs, g in ((plan.actor, ctx.inputs[0], g_params), (plan.critic, ctx.inputs[1], g_values[:, None])):
            for i in range(len(layers) - 1, -1, -1):
                layer = layers[i]
                torch.mm(g.t(), inputs[i], out=layer.grad_weight)
                torch.sum(g, 0, out=layer.grad_bias)
                if i:
                    g = _tanh_backward(torch.mm(g, layer.weight), inputs[i])
        ctx.inputs = None
        return None, plan.grad.clone(), None


def install_fused_forward(model: ActorCriticMLP, flat: FlatParameters) -> FusedActorCritic:
    """Run ``model``'s forward as one node over ``flat`` (built from the model's parameters, so
    its modules' weights are views of ``flat.param``): same values and gradients, fewer ops."""
    plan = FusedActorCritic(model.actor, model.critic, flat.param,
                            {id(p): s for p, s in zip(flat.params, flat.slices)})
    model.forward_override = plan
    return plan
