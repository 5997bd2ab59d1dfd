"""Actor-critic for image observations: a shared CNN torso, then a linear actor and critic.

The torso is chosen by the image size: the Nature DQN CNN (Mnih et al. 2015: 32 8x8/4, 64 4x4/2,
64 3x3/1, then 512 units, ReLU) for frames of at least 36 pixels a side (Atari's 84x84), and the
MinAtar network (Young & Tian 2019: one 16-filter 3x3 convolution, then 128 units) for small grids
(MinAtar's 10x10). Actor and critic share the torso, as in the PPO Atari setting (Huang et al.
2022, "The 37 implementation details of PPO"), with orthogonal init: sqrt(2) in the torso, 0.01 on
the policy output, 1 on the value output. Observations arrive as flat ``uint8`` pixels
(:class:`rlkit.core.encoders.ImageEncoder`) and are scaled to ``[0, 1]`` here, on the model's device.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from rlkit.core.heads import PolicyHead
from rlkit.gym.policies import ActResult

NATURE_MIN_SIDE = 36
"""The Nature CNN's three convolutions need at least 36 pixels a side."""


def _layer(module: nn.Module, gain: float) -> nn.Module:
    nn.init.orthogonal_(module.weight, gain)
    nn.init.zeros_(module.bias)
    return module


def torso(image: tuple[int, int, int]) -> tuple[nn.Sequential, int]:
    """The CNN torso for ``(C, H, W)`` images and its output width."""
    c, h, w = image
    g = math.sqrt(2)
    if min(h, w) >= NATURE_MIN_SIDE:
        convs = [_layer(nn.Conv2d(c, 32, 8, 4), g), nn.ReLU(), _layer(nn.Conv2d(32, 64, 4, 2), g), nn.ReLU(),
                 _layer(nn.Conv2d(64, 64, 3, 1), g), nn.ReLU(), nn.Flatten()]
        width = 512
    else:
        convs = [_layer(nn.Conv2d(c, 16, 3, 1), g), nn.ReLU(), nn.Flatten()]
        width = 128
    with torch.no_grad():
        flat = nn.Sequential(*convs)(torch.zeros(1, c, h, w)).shape[1]
    return nn.Sequential(*convs, _layer(nn.Linear(flat, width), g), nn.ReLU()), width


class CNNActorCritic(nn.Module):
    """Shared CNN torso with a linear actor (the head's parameters) and a linear critic.

    ``forward`` takes ``obs [B, C*H*W]`` pixels (``uint8``, or floats of the same values) and
    returns (distribution params ``[B, out_dim]``, values ``[B]``). Parameters are ordered actor
    (torso included) first, then critic, as :class:`rlkit.gym.policies.MLPActorCritic` orders them."""

    def __init__(self, image: tuple[int, int, int], scale: float, head: PolicyHead) -> None:
        super().__init__()
        self.image, self.scale, self.head = image, scale, head
        self.obs_dim = int(np.prod(image))
        self.torso, width = torso(image)
        self.actor = _layer(nn.Linear(width, head.out_dim), 0.01)
        self.critic = _layer(nn.Linear(width, 1), 1.0)
        self.forward_override = None
        """Unused: no fused kernel replaces a CNN (the fast path wires MLPs only)."""

    def actor_parameters(self) -> list[nn.Parameter]:
        return [*self.torso.parameters(), *self.actor.parameters(), *self.head.parameters()]

    def critic_parameters(self) -> list[nn.Parameter]:
        return list(self.critic.parameters())

    def ordered_parameters(self) -> list[nn.Parameter]:
        return self.actor_parameters() + self.critic_parameters()

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """``[B, width]`` torso output for flat pixels ``[B, C*H*W]``."""
        x = obs.reshape(obs.shape[0], *self.image).to(torch.float32) * self.scale
        return self.torso(x)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.features(obs)
        return self.actor(z), self.critic(z).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.features(obs)).squeeze(-1)

    def snapshot(self) -> "TorchActor":
        return TorchActor(self)


class TorchActor:
    """Acting with a :class:`CNNActorCritic` (the interface of :class:`rlkit.gym.policies.NumpyActor`):
    the network runs in torch without gradients on its device, sampling in numpy as for MLPs. It
    holds the model itself: re-take the snapshot after every optimizer step, as for MLPs (the
    weights it sees are the model's current ones)."""

    def __init__(self, model: CNNActorCritic) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.sampler = model.head.numpy_sampler()

    @torch.no_grad()
    def _run(self, obs: np.ndarray, critic: bool) -> tuple[np.ndarray, np.ndarray | None]:
        x = torch.from_numpy(np.ascontiguousarray(obs)).to(self.device)
        params, values = self.model(x)
        return params.float().cpu().numpy(), values.float().cpu().numpy() if critic else None

    def params(self, obs: np.ndarray) -> np.ndarray:
        """``[N, out_dim]`` distribution parameters (logits or means)."""
        return self._run(obs, critic=False)[0]

    def value(self, obs: np.ndarray) -> np.ndarray:
        return self._run(obs, critic=True)[1]  # type: ignore[return-value]

    def mode(self, obs: np.ndarray) -> np.ndarray:
        return self.sampler.mode(self._run(obs, critic=False)[0])

    def act(self, obs: np.ndarray, rng: np.random.Generator, with_values: bool = True) -> ActResult:
        params, values = self._run(obs, critic=with_values)
        actions, log_probs = self.sampler.sample(params, rng)
        return ActResult(actions, log_probs, values)
