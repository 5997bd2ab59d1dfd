"""Actor-critic networks: separate actor and critic MLPs with a pluggable head.

Initialization follows the PPO implementation details (Huang et al. 2022): orthogonal
weights with gain sqrt(2) on hidden layers, 0.01 on the policy output, 1.0 on the value
output; zero biases. ``--no-ortho-init`` keeps PyTorch's default initialization of every layer
instead (:func:`default_init`, Stable-Baselines3's ``ortho_init=False``); ``--activation relu``
puts ReLU between the hidden layers in place of tanh.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlkit.core.encoders import make_encoder
from rlkit.core.heads import PolicyHead, make_head


class ActResult(NamedTuple):
    """What acting produces for ``N`` observations (numpy, float32)."""

    actions: np.ndarray
    """``[N]`` int64 (discrete) or ``[N, A]`` float32, as sampled (unclipped)."""
    log_probs: np.ndarray
    """``[N]`` log pi(a|s) of the sampled actions."""
    values: np.ndarray | None
    """``[N]`` V(s) (None when not asked for)."""


ACTIVATIONS: dict[str, tuple[type[nn.Module], Callable[[np.ndarray], np.ndarray]]] = {
    "tanh": (nn.Tanh, np.tanh), "relu": (nn.ReLU, lambda x: np.maximum(x, np.float32(0)))}
"""The hidden layers' activations: the torch module and the numpy function acting uses."""


def _mlp(sizes: list[int], out_gain: float, activation: str = "tanh") -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        linear = nn.Linear(sizes[i], sizes[i + 1])
        last = i == len(sizes) - 2
        nn.init.orthogonal_(linear.weight, out_gain if last else math.sqrt(2))
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(ACTIVATIONS[activation][0]())
    return nn.Sequential(*layers)


def default_init(model: nn.Module) -> None:
    """Every layer of ``model`` back to PyTorch's own initialization (``reset_parameters``: Linear,
    LSTM, GRU, Conv), drawn from torch's seeded stream; parameters outside layers (a Gaussian
    head's log-std) keep theirs."""
    for module in model.modules():
        if module is not model and callable(getattr(module, "reset_parameters", None)):
            module.reset_parameters()


class MLPActorCritic(nn.Module):
    """Separate actor and critic MLPs (tanh, or ``activation``) over encoded observations (:mod:`rlkit.core.encoders`).

    Parameters are ordered actor first, then critic (``actor_parameters`` /
    ``critic_parameters``), so a flat parameter vector has the actor as its prefix.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, hidden_sizes: tuple[int, ...] = (64, 64),
                 activation: str = "tanh") -> None:
        super().__init__()
        self.obs_dim = make_encoder(obs_space).dim
        self.head: PolicyHead = make_head(action_space)
        self.activation = activation
        sizes = [self.obs_dim, *hidden_sizes]
        self.actor = _mlp([*sizes, self.head.out_dim], out_gain=0.01, activation=activation)
        self.critic = _mlp([*sizes, 1], out_gain=1.0, activation=activation)
        self.forward_override: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None
        """A replacement for the modules in ``forward`` with the same values and gradients, set by
        whoever owns it (a trainer's kernels); None: the modules run."""

    def actor_parameters(self) -> list[nn.Parameter]:
        return [*self.actor.parameters(), *self.head.parameters()]

    def critic_parameters(self) -> list[nn.Parameter]:
        return list(self.critic.parameters())

    def ordered_parameters(self) -> list[nn.Parameter]:
        return self.actor_parameters() + self.critic_parameters()

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs [B, obs_dim]`` -> (distribution params ``[B, out_dim]``, values ``[B]``)."""
        if self.forward_override is not None:
            return self.forward_override(obs)
        return self.actor(obs), self.critic(obs).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``[B]`` V(s)."""
        return self.critic(obs).squeeze(-1)

    def snapshot(self) -> "NumpyActor":
        return NumpyActor(self)


class NumpyActor:
    """A frozen float32 numpy copy of an :class:`MLPActorCritic` for acting.

    Acting on a few observations is dominated by per-op dispatch cost; numpy's is a
    fraction of torch's, so the rollout loop runs in numpy and only the update uses torch.
    Re-take the snapshot after every optimizer step. Tested against the torch head.
    """

    def __init__(self, model: MLPActorCritic) -> None:
        def layers(seq: nn.Sequential) -> list[tuple[np.ndarray, np.ndarray]]:
            return [(m.weight.detach().cpu().numpy().T.copy(), m.bias.detach().cpu().numpy().copy())
                    for m in seq if isinstance(m, nn.Linear)]

        self.actor = layers(model.actor)
        self.critic = layers(model.critic)
        self.sampler = model.head.numpy_sampler()
        self.activation = ACTIVATIONS[getattr(model, "activation", "tanh")][1]

    def _mlp(self, x: np.ndarray, layers: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        for w, b in layers[:-1]:
            x = self.activation(x @ w + b)
        w, b = layers[-1]
        return x @ w + b

    def params(self, obs: np.ndarray) -> np.ndarray:
        """``[N, out_dim]`` distribution parameters (logits or means)."""
        return self._mlp(obs, self.actor)

    def value(self, obs: np.ndarray) -> np.ndarray:
        return self._mlp(obs, self.critic)[:, 0]

    def mode(self, obs: np.ndarray) -> np.ndarray:
        return self.sampler.mode(self._mlp(obs, self.actor))

    def act(self, obs: np.ndarray, rng: np.random.Generator, with_values: bool = True) -> ActResult:
        """Sample actions for ``obs [N, obs_dim]`` float32. ``with_values=False`` skips the critic
        (``values`` is then None): the trainer evaluates V over the whole rollout in one pass."""
        actions, log_probs = self.sampler.sample(self._mlp(obs, self.actor), rng)
        return ActResult(actions, log_probs, self.value(obs) if with_values else None)
