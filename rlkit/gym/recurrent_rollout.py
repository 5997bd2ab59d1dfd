"""What a recurrent policy (``--memory``) adds to a run's rollouts: the envs' memory state, reset
where an episode starts (terminated and truncated alike, as the env resets), stored before every
step with the episode starts, and the rollout cut into the sequences its update replays.

The trainer composes one :class:`MemoryRollout`; its state starts at zero whenever the envs are
reset (the start of a run and after every checkpoint, see :meth:`PPOTrainer._start_episodes`),
so a resumed run continues with the state an uninterrupted one had.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlkit.core.buffer import FullBatch
from rlkit.core.sequences import SequenceBatches, SequenceMinibatch, sequences_on
from rlkit.errors import ConfigError
from rlkit.gym.policies import ActResult
from rlkit.gym.recurrent_policy import NumpyRecurrentActor, reset_where


class MemoryRollout:
    """The memory side of one rollout of ``T`` steps on ``N`` envs."""

    def __init__(self, num_steps: int, num_envs: int, state_size: int, bptt_length: int) -> None:
        self.state = np.zeros((num_envs, state_size), np.float32)
        """``[N, 2 S]`` the state before the next step (not yet zeroed for a new episode)."""
        self.starting = np.ones(num_envs, bool)
        """``[N]`` whether the next step starts an episode."""
        self.states = np.zeros((num_steps, num_envs, state_size), np.float32)
        """``[T, N, 2 S]`` the state each step was acted in."""
        self.starts = np.zeros((num_steps, num_envs), bool)
        """``[T, N]`` whether each step started an episode."""
        self.after = self.state
        """``[N, 2 S]`` the state after the latest step."""
        self.length = bptt_length or num_steps

    def reset(self) -> None:
        """The envs were reset: every env starts an episode."""
        self.state[:] = 0
        self.starting[:] = True

    def act(self, t: int, actor: NumpyRecurrentActor, obs: np.ndarray, rng: np.random.Generator) -> ActResult:
        """Step ``t``'s actions (with values) for ``obs [N, obs_dim]``; the state they were taken in is stored."""
        state = reset_where(self.state, self.starting)
        self.states[t], self.starts[t] = state, self.starting
        step = actor.act(obs, state, rng)
        self.after = step.state
        return step.act

    def stepped(self, dones: np.ndarray) -> None:
        """After the envs' step: ``dones [N]`` start new episodes at the next step."""
        self.state, self.starting = self.after, np.asarray(dones, bool).copy()

    def final_values(self, actor: NumpyRecurrentActor, final_obs: np.ndarray, env_ids: np.ndarray) -> np.ndarray:
        """V of the final observations of the envs ``env_ids`` whose episodes were cut (time-outs),
        seen in the state their last step left."""
        return actor.value(final_obs, self.after[env_ids])

    def last_values(self, actor: NumpyRecurrentActor, obs: np.ndarray) -> np.ndarray:
        """``[N]`` V of the observations after the rollout (the bootstrap), in the state they are met in."""
        return actor.value(obs, reset_where(self.state, self.starting))

    def sequences(self, selected: FullBatch, model: Any = None, num_minibatches: int = 1,
                  generator: torch.Generator | None = None) -> SequenceBatches:
        """The latest rollout (flat, time-major) as the sequences an update replays; with ``model``
        (the policy that acted), its behaviour log-probs replayed over the first epoch's minibatches
        (:meth:`SequenceBatches.replay_log_probs`: the first ratio of each is exactly 1)."""
        sequences = SequenceBatches(selected.pooled, torch.from_numpy(self.starts.copy()),
                                    torch.from_numpy(self.states.copy()), self.length)
        if model is not None and generator is not None:
            device = next(model.parameters()).device

            def log_probs(mb: SequenceMinibatch) -> torch.Tensor:
                mb = sequences_on(mb, device)
                return model.head.log_prob_entropy(model.replay(mb.obs, mb.starts, mb.state)[0],
                                                   mb.targets.actions)[0]

            sequences.replay_log_probs(log_probs, num_minibatches, generator)
        return sequences


def recurrent_rollout(cfg: Any, model: Any, objective: Any) -> MemoryRollout | None:
    """The memory side of ``cfg``'s rollouts (None for a feed-forward policy); an objective that
    reads the behaviour policy's whole distribution of each sample is refused in one line."""
    if not cfg.memory:
        return None
    if objective.needs_dist_params:
        raise ConfigError(f"the objective {objective.name!r} reads the behaviour policy's distribution of every "
                          "sample, which --memory does not store yet")
    return MemoryRollout(cfg.num_steps, cfg.num_envs, model.state_size, cfg.bptt_length)
