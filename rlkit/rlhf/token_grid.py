"""The token grid of an RLHF iteration and its pieces.

N sequences side by side: prompts left-padded to width P, then up to T response columns. The
transition ``(t, n)`` emitted the token at column ``P + t`` of row n; ``[T, N]`` tensors hold
its action, log-prob, value, reward and end flags, ``valid`` marks the steps of a response.
The same grid feeds :func:`compute_gae` whether it is the latest rollout or, for HP3O, a grid
rebuilt from stored sequences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, NamedTuple

import torch

from rlkit.core.buffer import Batch
from rlkit.core.gae import compute_gae
from rlkit.variants.base import Stateless


@dataclass
class TokenGrid:
    ids: torch.Tensor
    """``[N, P + T]`` left-padded prompts, then response tokens."""
    mask: torch.Tensor
    """``[N, P + T]`` attention mask (prompt padding 0)."""
    prompt_width: int
    actions: torch.Tensor
    """``[T, N]`` token ids."""
    log_probs: torch.Tensor
    """``[T, N]`` behaviour log-probs."""
    values: torch.Tensor
    rewards: torch.Tensor
    """``[T, N]`` rewards (env score on the last token; the trainer adds the KL penalty)."""
    final_values: torch.Tensor
    """``[T, N]`` V after the last token where a response was truncated (bootstrap)."""
    terminated: torch.Tensor
    dones: torch.Tensor
    valid: torch.Tensor
    """``[T, N]`` the step belongs to a response."""

    @property
    def num_sequences(self) -> int:
        return self.ids.shape[0]

    def transitions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows, cols) of every valid transition, sequence by sequence."""
        vn, vt = self.valid.T.nonzero(as_tuple=True)
        return vn, self.prompt_width + vt

    def batch(self, gamma: float, lam: float) -> Batch:
        """GAE on the grid (steps past a response's end are terminal with zero reward and value)
        and the flat batch of valid transitions; ``Batch.obs`` holds their ``(row, col)``."""
        invalid = ~self.valid
        values = self.values.masked_fill(invalid, 0.0)
        next_values = torch.cat([values[1:], torch.zeros_like(values[:1])])
        next_values = torch.where(self.dones, self.final_values, next_values)
        gae = compute_gae(self.rewards.masked_fill(invalid, 0.0).cpu(), values.cpu(), next_values.cpu(),
                          (self.terminated | invalid).cpu(), (self.dones | invalid).cpu(), gamma, lam)
        rows, cols = self.transitions()
        vt = cols - self.prompt_width
        adv, ret = gae.advantages.to(values.device), gae.returns.to(values.device)
        return Batch(torch.stack([rows, cols], 1), self.actions[vt, rows], self.log_probs[vt, rows], adv[vt, rows],
                     ret[vt, rows], values[vt, rows])


def left_pad(prompts: list[list[int]], steps: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``[N, P + steps]`` ids and mask with the prompts right-aligned at width P."""
    width = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), width + steps, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p): width] = torch.as_tensor(p, device=device)
        mask[i, width - len(p):] = 1
    return ids, mask, width


class LMRollout(NamedTuple):
    """An iteration's rollout as the trainer hands it to its batch source."""

    grid: TokenGrid
    """With KL-shaped rewards, behaviour log-probs and values filled in."""
    env_rewards: torch.Tensor
    """``[T, N]`` the env's own rewards (score and missing-EOS penalty, no KL shaping)."""


class FreshGrid(Stateless):
    """Plain PPO's batch source on the LLM env: the epochs train on the latest grid."""

    name = "rollout"

    def batches(self, rollout: LMRollout, update: int) -> tuple[TokenGrid, dict[str, float]]:
        return rollout.grid, {}


@dataclass
class SequenceRecord:
    """One finished response kept by HP3O on the LLM env (its trajectory)."""

    prompt: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    terminated: bool
    final_value: float
    episode_return: float
    """Sum of the env's rewards (score and missing-EOS penalty; KL shaping excluded)."""
    finished_update: int


class ResponseAdapter:
    """HP3O's adapter for LLM responses (:class:`rlkit.variants.hp3o.TrajectoryAdapter`): every
    response of the rollout is a finished trajectory; the chosen ones are laid out as a grid."""

    record_type = SequenceRecord

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def split(self, rollout: LMRollout, update: int) -> list[SequenceRecord]:
        return records_from_grid(rollout.grid, rollout.env_rewards, update)

    def batches(self, chosen: list[SequenceRecord], update: int) -> tuple[TokenGrid, dict[str, float]]:
        return grid_from_records(chosen, self.device), {}

    def reset(self) -> None:
        pass


def records_from_grid(grid: TokenGrid, env_rewards: torch.Tensor, update: int) -> list[SequenceRecord]:
    records = []
    for n in range(grid.num_sequences):
        steps = grid.valid[:, n]
        last = int(steps.sum()) - 1
        prompt = grid.ids[n, :grid.prompt_width][grid.mask[n, :grid.prompt_width].bool()]
        records.append(SequenceRecord(prompt.clone(), grid.actions[steps, n].clone(), grid.log_probs[steps, n].clone(),
                                      grid.values[steps, n].clone(), grid.rewards[steps, n].clone(),
                                      bool(grid.terminated[last, n]), float(grid.final_values[last, n]),
                                      float(env_rewards[steps, n].sum()), update))
    return records


def grid_from_records(records: list[SequenceRecord], device: torch.device) -> TokenGrid:
    steps = max(len(r.actions) for r in records)
    ids, mask, width = left_pad([r.prompt.tolist() for r in records], steps, device)
    n = len(records)
    f = {k: torch.zeros(steps, n, device=device) for k in ("log_probs", "values", "rewards", "final_values")}
    actions = torch.zeros(steps, n, dtype=torch.long, device=device)
    b = {k: torch.zeros(steps, n, dtype=torch.bool, device=device) for k in ("terminated", "dones", "valid")}
    for j, r in enumerate(records):
        length = len(r.actions)
        ids[j, width: width + length] = r.actions
        actions[:length, j] = r.actions
        f["log_probs"][:length, j], f["values"][:length, j], f["rewards"][:length, j] = r.log_probs, r.values, r.rewards
        f["final_values"][length - 1, j] = r.final_value
        b["valid"][:length, j] = True
        b["dones"][length - 1, j] = True
        b["terminated"][length - 1, j] = r.terminated
    return TokenGrid(ids, mask, width, actions, f["log_probs"], f["values"], f["rewards"], f["final_values"],
                     b["terminated"], b["dones"], b["valid"])


class SequenceMinibatch(NamedTuple):
    sequences: torch.Tensor
    """``[m]`` rows of the token grid in this minibatch."""
    transitions: torch.Tensor
    """``[n]`` indices of all their valid transitions in the flat batch."""
    local_rows: torch.Tensor
    """``[n]`` each transition's row within ``sequences``."""


def sequence_minibatches(rows: torch.Tensor, num_sequences: int, num_minibatches: int,
                         generator: torch.Generator) -> Iterator[SequenceMinibatch]:
    """One epoch of minibatches made of whole sequences (like recurrent PPO): shuffle the
    sequences, split them into ``num_minibatches`` groups, take every transition of each group.
    ``rows [B]`` is the sequence of each flat transition."""
    perm = torch.randperm(num_sequences, generator=generator, device=generator.device).to(rows.device)
    for group in perm.chunk(num_minibatches):
        local = torch.full((num_sequences,), -1, dtype=torch.long, device=rows.device)
        local[group] = torch.arange(len(group), device=rows.device)
        transitions = (local[rows] >= 0).nonzero(as_tuple=True)[0]
        yield SequenceMinibatch(group, transitions, local[rows[transitions]])


