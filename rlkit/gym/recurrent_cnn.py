"""A recurrent actor-critic for image observations (``--memory`` on an image env): the CNN torso of
:mod:`rlkit.gym.cnn`, one memory torso over its features, then a linear actor and critic.

Actor and critic share the CNN and the memory, as CleanRL's LSTM Atari agent does (Huang et al.
2022, "The 37 implementation details of PPO"): the state of ``N`` envs is ``[N, S]``. Acting runs
the network in torch without gradients (as :class:`rlkit.gym.cnn.TorchActor`); the update replays
whole sequences from their stored starting states, like :class:`RecurrentActorCritic`'s.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rlkit.core.heads import PolicyHead
from rlkit.core.memory import MemoryTorso, make_memory
from rlkit.gym.cnn import _layer, torso
from rlkit.gym.policies import ActResult
from rlkit.gym.recurrent_policy import RecurrentActResult


class RecurrentCNNActorCritic(nn.Module):
    """``obs [.., C*H*W]`` pixels -> CNN -> memory torso -> linear actor / critic."""

    def __init__(self, image: tuple[int, int, int], scale: float, head: PolicyHead, memory: str,
                 memory_size: int) -> None:
        super().__init__()
        self.image, self.scale, self.head = image, scale, head
        self.obs_dim = int(np.prod(image))
        self.torso, width = torso(image)
        self.memory: MemoryTorso = make_memory(memory, width, memory_size)
        self.actor = _layer(nn.Linear(memory_size, head.out_dim), 0.01)
        self.critic = _layer(nn.Linear(memory_size, 1), 1.0)
        self.state_size = self.memory.state_size
        """``S``: an env's state (shared by actor and critic)."""

    def actor_parameters(self) -> list[nn.Parameter]:
        return [*self.torso.parameters(), *self.memory.parameters(), *self.actor.parameters(),
                *self.head.parameters()]

    def critic_parameters(self) -> list[nn.Parameter]:
        return list(self.critic.parameters())

    def ordered_parameters(self) -> list[nn.Parameter]:
        return self.actor_parameters() + self.critic_parameters()

    def initial_state(self, n: int) -> np.ndarray:
        return np.zeros((n, self.state_size), np.float32)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """``[B, width]`` CNN output for flat pixels ``[B, C*H*W]``."""
        return self.torso(obs.reshape(obs.shape[0], *self.image).to(torch.float32) * self.scale)

    def replay(self, obs: torch.Tensor, starts: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs [L, B, C*H*W]``, ``starts [L, B]``, ``state [B, S]`` -> (params ``[L * B, out_dim]``,
        values ``[L * B]``), time-major (see :meth:`RecurrentActorCritic.replay`)."""
        length, width = obs.shape[:2]
        z = self.features(obs.reshape(length * width, -1)).reshape(length, width, -1)
        h = self.memory.replay(z, starts, state).reshape(length * width, -1)
        return self.actor(h), self.critic(h).squeeze(-1)

    def snapshot(self) -> "TorchRecurrentActor":
        return TorchRecurrentActor(self)


class TorchRecurrentActor:
    """Acting with a :class:`RecurrentCNNActorCritic` (the interface of
    :class:`rlkit.gym.recurrent_policy.NumpyRecurrentActor`), in torch without gradients."""

    def __init__(self, model: RecurrentCNNActorCritic) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.sampler = model.head.numpy_sampler()

    @torch.no_grad()
    def _run(self, obs: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(params ``[N, out_dim]``, values ``[N]``, next state ``[N, S]``)."""
        m = self.model
        z = m.features(torch.from_numpy(np.ascontiguousarray(obs)).to(self.device))
        h, nxt = m.memory.step(z, torch.from_numpy(np.ascontiguousarray(state)).to(self.device))
        return (m.actor(h).float().cpu().numpy(), m.critic(h).squeeze(-1).float().cpu().numpy(),
                nxt.float().cpu().numpy())

    def act(self, obs: np.ndarray, state: np.ndarray, rng: np.random.Generator) -> RecurrentActResult:
        params, values, nxt = self._run(obs, state)
        actions, log_probs = self.sampler.sample(params, rng)
        return RecurrentActResult(ActResult(actions, log_probs, values), nxt)

    def mode(self, obs: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        params, _, nxt = self._run(obs, state)
        return self.sampler.mode(params), nxt

    def value(self, obs: np.ndarray, state: np.ndarray) -> np.ndarray:
        return self._run(obs, state)[1]
