"""The token grid of an RLHF iteration and its pieces.

N sequences side by side: prompts left-padded to width P, then up to T response columns. The
transition ``(t, n)`` emitted the token at column ``P + t`` of row n; ``[T, N]`` tensors hold
its action, log-prob, value, reward and end flags, ``valid`` marks the steps of a response.
The same grid feeds :func:`compute_gae` whether it is the latest rollout or, for HP3O, a grid
rebuilt from stored sequences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from rlkit.core.buffer import Batch
from rlkit.core.gae import compute_gae


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
    advantages: torch.Tensor | None = None
    """``[T, N]`` advantages given by the batch source instead of GAE (critic-free estimators such as
    RLOO and GRPO); the value targets are then the values themselves, so no value loss arises."""

    @property
    def num_sequences(self) -> int:
        return self.ids.shape[0]

    def transitions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows, cols) of every valid transition, sequence by sequence."""
        vn, vt = self.valid.T.nonzero(as_tuple=True)
        return vn, self.prompt_width + vt

    def batch(self, gamma: float, lam: float) -> Batch:
        """GAE on the grid (steps past a response's end are terminal with zero reward and value),
        or the given :attr:`advantages`, and the flat batch of valid transitions; ``Batch.obs``
        holds their ``(row, col)``."""
        invalid = ~self.valid
        values = self.values.masked_fill(invalid, 0.0)
        rows, cols = self.transitions()
        vt = cols - self.prompt_width
        if self.advantages is not None:
            adv, ret = self.advantages, values
        else:
            next_values = torch.cat([values[1:], torch.zeros_like(values[:1])])
            next_values = torch.where(self.dones, self.final_values, next_values)
            gae = compute_gae(self.rewards.masked_fill(invalid, 0.0).cpu(), values.cpu(), next_values.cpu(),
                              (self.terminated | invalid).cpu(), (self.dones | invalid).cpu(), gamma, lam)
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
