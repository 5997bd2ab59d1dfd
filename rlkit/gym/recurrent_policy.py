"""A recurrent actor-critic (``--memory lstm|gru``): encoded observations, a memory torso, then the
MLP and head of :class:`rlkit.gym.policies.MLPActorCritic`.

Actor and critic each have their own torso (sb3-contrib's RecurrentPPO default, so runs compare
at equal settings); the state of ``N`` envs is ``[N, 2 S]``, the actor's ``S`` numbers then the
critic's. Acting steps the numpy copy (:class:`NumpyRecurrentActor`); the update replays whole
sequences from their stored starting states (:meth:`RecurrentActorCritic.replay`).
"""

from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlkit.core.encoders import make_encoder
from rlkit.core.heads import PolicyHead, make_head
from rlkit.core.memory import MemoryTorso, make_memory
from rlkit.gym.policies import ActResult, NumpyActor, _mlp


class RecurrentActResult(NamedTuple):
    """What acting on ``N`` observations produces, with the state after them."""

    act: ActResult
    """Actions, their log-probs and (asked for) values."""
    state: np.ndarray
    """``[N, 2 S]`` the state after these observations."""


class RecurrentActorCritic(nn.Module):
    """``obs [.., obs_dim]`` -> torso (per side) -> MLP ``hidden_sizes`` (``activation``) -> head / value."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, memory: str, memory_size: int,
                 hidden_sizes: tuple[int, ...] = (64, 64), activation: str = "tanh") -> None:
        super().__init__()
        self.obs_dim = make_encoder(obs_space).dim
        self.head: PolicyHead = make_head(action_space)
        self.actor_memory: MemoryTorso = make_memory(memory, self.obs_dim, memory_size)
        self.critic_memory: MemoryTorso = make_memory(memory, self.obs_dim, memory_size)
        sizes = [memory_size, *hidden_sizes]
        self.activation = activation
        self.actor = _mlp([*sizes, self.head.out_dim], out_gain=0.01, activation=activation)
        self.critic = _mlp([*sizes, 1], out_gain=1.0, activation=activation)
        self.side_state = self.actor_memory.state_size
        """``S``: one side's state numbers per env."""

    @property
    def state_size(self) -> int:
        """``2 S``: an env's state (actor's, then critic's)."""
        return 2 * self.side_state

    def actor_parameters(self) -> list[nn.Parameter]:
        return [*self.actor_memory.parameters(), *self.actor.parameters(), *self.head.parameters()]

    def critic_parameters(self) -> list[nn.Parameter]:
        return [*self.critic_memory.parameters(), *self.critic.parameters()]

    def ordered_parameters(self) -> list[nn.Parameter]:
        return self.actor_parameters() + self.critic_parameters()

    def initial_state(self, n: int) -> np.ndarray:
        """``[n, 2 S]`` zeros, the state at an episode's start."""
        return np.zeros((n, self.state_size), np.float32)

    def replay(self, obs: torch.Tensor, starts: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs [L, B, obs_dim]`` of ``B`` sequences, ``starts [L, B]`` (an episode starts: the state
        is zeroed first), ``state [B, 2 S]`` at their first steps -> (distribution params
        ``[L * B, out_dim]``, values ``[L * B]``), in time-major order (row ``t * B + b``)."""
        s = self.side_state
        feats_a = self.actor_memory.replay(obs, starts, state[:, :s])
        feats_c = self.critic_memory.replay(obs, starts, state[:, s:])
        flat = obs.shape[0] * obs.shape[1]
        return self.actor(feats_a.reshape(flat, -1)), self.critic(feats_c.reshape(flat, -1)).squeeze(-1)

    def snapshot(self) -> "NumpyRecurrentActor":
        return NumpyRecurrentActor(self)


class NumpyRecurrentActor:
    """A frozen float32 numpy copy of a :class:`RecurrentActorCritic` stepping ``N`` envs."""

    def __init__(self, model: RecurrentActorCritic) -> None:
        self.actor_memory, self.critic_memory = model.actor_memory.snapshot(), model.critic_memory.snapshot()
        self.tail = NumpyActor(model)  # type: ignore[arg-type]  (the MLPs after the torsos, and the sampler)
        self.side = model.side_state

    def features(self, obs: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(actor features ``[N, H]``, critic features ``[N, H]``, next state ``[N, 2 S]``)."""
        s = self.side
        fa, sa = self.actor_memory.step(obs, state[:, :s])
        fc, sc = self.critic_memory.step(obs, state[:, s:])
        return fa, fc, np.concatenate([sa, sc], axis=1)

    def act(self, obs: np.ndarray, state: np.ndarray, rng: np.random.Generator) -> RecurrentActResult:
        """Sample actions for ``obs [N, obs_dim]`` in ``state [N, 2 S]`` (already zeroed where an
        episode starts); values come with them."""
        fa, fc, nxt = self.features(obs, state)
        actions, log_probs = self.tail.sampler.sample(self.tail.params(fa), rng)
        return RecurrentActResult(ActResult(actions, log_probs, self.tail.value(fc)), nxt)

    def mode(self, obs: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(deterministic actions, next state)."""
        fa, _, nxt = self.features(obs, state)
        return self.tail.sampler.mode(self.tail.params(fa)), nxt

    def value(self, obs: np.ndarray, state: np.ndarray) -> np.ndarray:
        """``[N]`` V of ``obs`` seen in ``state`` (the state it leaves is not kept)."""
        return self.tail.value(self.critic_memory.step(obs, state[:, self.side:])[0])


def reset_where(state: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``state [N, 2 S]`` with the rows of envs whose episode starts (``starts [N]``) zeroed."""
    return np.where(starts[:, None], np.float32(0), state) if starts.any() else state

