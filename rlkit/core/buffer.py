"""Rollout storage: preallocated ``[T, N, ...]`` CPU tensors with numpy views for the
rollout loop, flattened into a :class:`Batch` for the update."""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple, Sequence

import numpy as np
import torch

from rlkit.core.gae import compute_gae


class Batch(NamedTuple):
    """Flat transitions for the PPO loss (``B`` = batch or minibatch size)."""

    obs: torch.Tensor
    """``[B, obs_dim]`` float32 (normalized as the policy saw them), or uint8 image pixels."""
    actions: torch.Tensor
    """``[B]`` int64 or ``[B, A]`` float32, unclipped samples."""
    log_probs: torch.Tensor
    """``[B]`` behaviour log pi(a|s)."""
    advantages: torch.Tensor
    """``[B]`` GAE advantages."""
    returns: torch.Tensor
    """``[B]`` value targets."""
    values: torch.Tensor
    """``[B]`` V(s) at collection time (for value clipping)."""
    behaviour_params: torch.Tensor | None = None
    """``[B, P]`` the behaviour policy's full distribution parameters (the head's ``full_params``),
    present only for an objective that needs them (an analytic KL penalty)."""
    segments: torch.Tensor | None = None
    """``[B]`` int64: which sequence of the minibatch (``0 .. S-1``) each sample belongs to, where
    the trainer trains on whole sequences (a response of the token env); None otherwise. An
    objective that aggregates per sequence reads it."""

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> "Batch":
        """``fn`` applied to every field present (an absent ``behaviour_params`` stays None)."""
        return Batch(*(None if x is None else fn(x) for x in self))

    @staticmethod
    def concat(parts: Sequence["Batch"]) -> "Batch":
        """The parts' rows one after another (a field the parts lack stays None)."""
        return Batch(*(None if xs[0] is None else torch.cat(xs) for xs in zip(*parts)))


class Rollout(NamedTuple):
    """A finished rollout as the trainer hands it to its batch source."""

    buffer: "RolloutBuffer"
    last_values: np.ndarray
    """``[N]`` V of the observations after the last step (the bootstrap)."""


class RolloutBuffer:
    """One rollout of ``num_steps`` x ``num_envs`` transitions."""

    def __init__(self, num_steps: int, num_envs: int, obs_dim: int, action_shape: tuple[int, ...],
                 action_dtype: torch.dtype, obs_dtype: torch.dtype = torch.float32) -> None:
        """``action_shape`` and ``action_dtype`` of one action, as the policy head stores it;
        ``obs_dtype``: ``uint8`` for image pixels (a quarter of float32's memory)."""
        t, n = num_steps, num_envs
        self.num_steps, self.num_envs, self.obs_dim, self.action_shape = t, n, obs_dim, tuple(action_shape)
        self.obs = torch.zeros(t, n, obs_dim, dtype=obs_dtype)
        self.actions = torch.zeros((t, n, *self.action_shape), dtype=action_dtype)
        self.log_probs = torch.zeros(t, n)
        self.values = torch.zeros(t, n)
        self.rewards = torch.zeros(t, n)
        self.raw_rewards = torch.zeros(t, n)
        self.final_values = torch.zeros(t, n)
        self.final_obs = torch.zeros(t, n, obs_dim, dtype=obs_dtype)
        self.terminated = torch.zeros(t, n, dtype=torch.bool)
        self.dones = torch.zeros(t, n, dtype=torch.bool)
        # numpy views share memory with the tensors: writes in the rollout loop are free of torch dispatch.
        self.np = {k: getattr(self, k).numpy() for k in self.FIELDS}

    FIELDS = ("obs", "actions", "log_probs", "values", "rewards", "raw_rewards", "final_values", "final_obs",
              "terminated", "dones")
    """The stored ``[T, N, ...]`` fields."""

    def place_in(self, arrays: dict[str, np.ndarray]) -> None:
        """Store the fields in ``arrays`` (contiguous ``[T, N, ...]`` arrays of the fields' shapes and
        dtypes, e.g. one row of a ``[K, T, N, ...]`` storage of several buffers) from now on."""
        for key in self.FIELDS:
            array = arrays[key]
            if array.shape != self.np[key].shape or array.dtype != self.np[key].dtype or not array.flags.c_contiguous:
                raise ValueError(f"{key}: {array.shape} {array.dtype} for {self.np[key].shape} {self.np[key].dtype}")
            array[...] = self.np[key]
            setattr(self, key, torch.from_numpy(array))
            self.np[key] = array

    def add_action(self, t: int, obs: np.ndarray, actions: np.ndarray, log_probs: np.ndarray,
                   values: np.ndarray | None) -> None:
        """Store step ``t``'s observation and what the policy did with it (``values`` may be
        filled later for the whole rollout, see :meth:`set_values`).

        Call this *before* stepping the envs: vector envs may reuse their observation array.
        """
        a = self.np
        a["obs"][t] = obs
        a["actions"][t] = actions
        a["log_probs"][t] = log_probs
        if values is not None:
            a["values"][t] = values

    def set_values(self, value_fn: Callable[[np.ndarray], np.ndarray]) -> None:
        """``values [T, N]`` = ``value_fn(obs [T*N, obs_dim])`` for the stored observations, in one pass."""
        t, n = self.num_steps, self.num_envs
        self.np["values"][:] = value_fn(self.np["obs"].reshape(t * n, self.obs_dim)).reshape(t, n)

    def add_outcome(self, t: int, rewards: np.ndarray, raw_rewards: np.ndarray, terminated: np.ndarray,
                    dones: np.ndarray) -> None:
        """Store step ``t``'s rewards (as trained on, and raw) and ``terminated`` / ``dones = terminated | truncated``."""
        a = self.np
        a["rewards"][t] = rewards
        a["raw_rewards"][t] = raw_rewards
        a["terminated"][t] = terminated
        a["dones"][t] = dones

    def set_final(self, t: int, env_ids: np.ndarray, obs: np.ndarray, values: np.ndarray) -> None:
        """Normalized final observation and its value for the sub-envs truncated at step ``t``."""
        self.np["final_obs"][t, env_ids] = obs
        self.np["final_values"][t, env_ids] = values

    def next_values(self, last_values: np.ndarray) -> torch.Tensor:
        """``[T, N]`` V of the true next state: the final observation where an episode ended,
        the next stored observation otherwise, ``last_values`` after the last step."""
        nxt = torch.empty_like(self.values)
        nxt[:-1] = self.values[1:]
        nxt[-1] = torch.from_numpy(np.asarray(last_values, dtype=np.float32))
        return torch.where(self.dones, self.final_values, nxt)

    def compute_batch(self, last_values: np.ndarray, gamma: float, lam: float) -> Batch:
        """Advantages by :func:`compute_gae` and the flattened ``[T*N]`` batch."""
        gae = compute_gae(self.rewards, self.values, self.next_values(last_values), self.terminated,
                          self.dones, gamma, lam)
        b = self.num_steps * self.num_envs
        return Batch(self.obs.reshape(b, self.obs_dim), self.actions.reshape(b, *self.action_shape), self.log_probs.reshape(b),
                     gae.advantages.reshape(b), gae.returns.reshape(b), self.values.reshape(b))


def stack_buffers(buffers: list[RolloutBuffer]) -> dict[str, np.ndarray]:
    """One ``[K, T, N, ...]`` array per field holding the ``K`` buffers' storage (buffer ``k``'s
    fields become row ``k``), for writing a step of all of them at once."""
    first = buffers[0].np
    arrays = {key: np.zeros((len(buffers), *first[key].shape), first[key].dtype) for key in RolloutBuffer.FIELDS}
    for k, buffer in enumerate(buffers):
        buffer.place_in({key: array[k] for key, array in arrays.items()})
    return arrays


class FullBatch:
    """Plain PPO's batch source: every epoch runs over the whole rollout, in shuffled minibatches."""

    shuffle = True

    def __init__(self, batch: Batch) -> None:
        self.pooled = batch

    def epoch_batch(self) -> Batch:
        return self.pooled


def iterate_minibatches(batch: Batch, num_minibatches: int, generator: torch.Generator,
                        shuffle: bool = True) -> Iterator[Batch]:
    """One epoch of minibatches: shuffled, or (``shuffle=False``) contiguous chunks in batch order.

    The fields are packed into one float matrix so an epoch costs a single gather; each
    minibatch is a set of views. Integer actions round-trip exactly through float32.
    """
    b = batch.obs.shape[0]
    action_shape, action_dtype = batch.actions.shape[1:], batch.actions.dtype
    pixels = batch.obs.dtype == torch.uint8  # image observations stay bytes: gathered on their own
    cols = [batch.actions.reshape(b, -1).float(),
            batch.log_probs[:, None], batch.advantages[:, None], batch.returns[:, None], batch.values[:, None]]
    if batch.behaviour_params is not None:
        cols.append(batch.behaviour_params)
    packed = torch.cat(cols if pixels else [batch.obs, *cols], dim=1)
    order = torch.randperm(b, generator=generator).to(packed.device) if shuffle else None
    shuffled = packed.index_select(0, order) if order is not None else packed
    obs = (batch.obs.index_select(0, order.to(batch.obs.device)) if order is not None else batch.obs) if pixels else None
    d, a = 0 if pixels else batch.obs.shape[1], cols[0].shape[1]
    num_minibatches = min(num_minibatches, b)  # a smaller batch (HP3O's paper sampling) still splits
    size = b // num_minibatches
    for start in range(0, size * num_minibatches, size):
        mb = shuffled[start:start + size]
        actions = mb[:, d:d + a].to(action_dtype).reshape(size, *action_shape)
        tail = mb[:, d + a:]
        mb_obs = obs[start:start + size] if obs is not None else mb[:, :d]
        yield Batch(mb_obs, actions, tail[:, 0], tail[:, 1], tail[:, 2], tail[:, 3],
                    tail[:, 4:] if batch.behaviour_params is not None else None)
