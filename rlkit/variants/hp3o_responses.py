"""HP3O on LLM responses: every response of a rollout is a finished trajectory, and the chosen
ones are laid out again as a token grid (Liu et al. 2025, arXiv 2502.15968; the FIFO and the
choice of trajectories are :mod:`rlkit.variants.hp3o`'s)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlkit.core.token_grid import LMRollout, TokenGrid, left_pad


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

    def check(self, record: SequenceRecord) -> None:
        pass  # a response record carries no observation width: the buffer's generic checks apply


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
