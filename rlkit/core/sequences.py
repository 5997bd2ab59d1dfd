"""Minibatches of whole env sequences for recurrent policies.

A rollout of ``T`` steps on ``N`` envs is cut into chunks of ``L`` steps (``--bptt-length``; the
whole rollout by default), ``C = (T / L) N`` sequences in all. Each keeps the memory state its
env had at the chunk's first step (stored while acting) and the episode starts inside it, so
replaying it gives the numbers the policy acted with. Minibatches are sets of sequences, never
shuffled steps (Kapturowski et al. 2019 replay stored states the same way; sb3-contrib's
RecurrentPPO and CleanRL's LSTM agent batch by env sequences).
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple

import torch

from rlkit.core.buffer import Batch


class SequenceMinibatch(NamedTuple):
    """``B`` sequences of ``L`` steps."""

    obs: torch.Tensor
    """``[L, B, obs_dim]`` observations as the policy saw them."""
    starts: torch.Tensor
    """``[L, B]`` bool: an episode starts at that step (the state is zeroed before it)."""
    state: torch.Tensor
    """``[B, S]`` the memory state at each sequence's first step."""
    targets: Batch
    """The ``L * B`` transitions' actions, log-probs, advantages, returns and values, time-major
    (row ``t * B + b``), as the policy's replay orders its outputs."""


class SequenceBatches:
    """Plain PPO's batch source for a recurrent policy: each epoch runs over every sequence of the
    latest rollout, in shuffled minibatches of sequences."""

    shuffle = True

    def __init__(self, batch: Batch, starts: torch.Tensor, states: torch.Tensor, length: int) -> None:
        """``batch``: the rollout flattened time-major (``[T * N]``, row ``t * N + n``, as
        :meth:`RolloutBuffer.compute_batch` gives it); ``starts [T, N]``; ``states [T, N, S]`` (the
        state before each step); ``length``: ``L``, dividing ``T``."""
        steps, envs = starts.shape
        if steps % length:
            raise ValueError(f"a sequence length of {length} does not divide the rollout's {steps} steps")
        self.pooled = batch
        self.length, chunks = length, steps // length
        self.count = chunks * envs
        """``C``: the sequences of the rollout."""

        def to_sequences(x: torch.Tensor) -> torch.Tensor:
            # [T, N, ...] -> [L, C, ...], sequence c = chunk * N + n
            x = x.reshape(chunks, length, envs, *x.shape[2:]).transpose(0, 1)
            return x.reshape(length, self.count, *x.shape[3:])

        self.obs = to_sequences(batch.obs.reshape(steps, envs, *batch.obs.shape[1:]))
        self.starts = to_sequences(starts)
        self.state = states[::length].reshape(self.count, *states.shape[2:])
        self.targets = Batch(*(None if x is None else to_sequences(x.reshape(steps, envs, *x.shape[1:]))
                               for x in batch))

    def replay_log_probs(self, log_probs: Callable[[SequenceMinibatch], torch.Tensor], num_minibatches: int,
                         generator: torch.Generator) -> None:
        """Set the behaviour log-probs to ``log_probs(mb) [L * B]`` (the policy replayed, before the
        epochs) over the first epoch's minibatches, ``generator`` read ahead and not advanced: each
        minibatch's first forward then has the same bits, and its ratio is exactly 1 until the
        policy moves. (Acting runs a float32 numpy copy of the network; its log-probs agree with
        the replay's within rounding only.)"""
        state = generator.get_state()
        picks = self._groups(num_minibatches, generator)
        generator.set_state(state)
        with torch.no_grad():
            for pick in picks:
                replayed = log_probs(self._minibatch(pick)).reshape(self.length, -1)
                self.targets.log_probs[:, pick] = replayed.to(self.targets.log_probs)

    def minibatches(self, num_minibatches: int, generator: torch.Generator) -> Iterator[SequenceMinibatch]:
        """One epoch: the sequences shuffled by ``generator`` in ``num_minibatches`` groups (at most
        ``C``) whose sizes differ by one at most: every sequence is trained on in every epoch."""
        for pick in self._groups(num_minibatches, generator):
            yield self._minibatch(pick)

    def _groups(self, num_minibatches: int, generator: torch.Generator) -> list[torch.Tensor]:
        order = torch.randperm(self.count, generator=generator)
        return [p.to(self.obs.device) for p in torch.tensor_split(order, min(num_minibatches, self.count))]

    def _minibatch(self, pick: torch.Tensor) -> SequenceMinibatch:
        targets = Batch(*(None if x is None else x.index_select(1, pick).reshape(-1, *x.shape[2:])
                          for x in self.targets))
        return SequenceMinibatch(self.obs.index_select(1, pick), self.starts.index_select(1, pick),
                                 self.state.index_select(0, pick), targets)


def sequences_on(mb: SequenceMinibatch, device: torch.device) -> SequenceMinibatch:
    """``mb`` with every tensor on ``device``."""
    return SequenceMinibatch(mb.obs.to(device), mb.starts.to(device), mb.state.to(device),
                             mb.targets.map(lambda x: x.to(device)))
