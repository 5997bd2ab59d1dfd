"""Minibatches of whole sequences on the token grid, and plain PPO's batch source for the LLM env.

The grid itself is :mod:`rlkit.core.token_grid`'s; HP3O's stored responses are
:mod:`rlkit.variants.hp3o_responses`'.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

import torch

from rlkit.core.token_grid import LMRollout, TokenGrid, left_pad
from rlkit.variants.base import Stateless
from rlkit.variants.hp3o_responses import ResponseAdapter, SequenceRecord, grid_from_records, records_from_grid

__all__ = ["FreshGrid", "LMRollout", "ResponseAdapter", "SequenceMinibatch", "SequenceRecord", "TokenGrid",
           "grid_from_records", "left_pad", "records_from_grid", "sequence_minibatches"]


class FreshGrid(Stateless):
    """Plain PPO's batch source on the LLM env: the epochs train on the latest grid."""

    name = "rollout"

    def batches(self, rollout: LMRollout, update: int) -> tuple[TokenGrid, dict[str, float]]:
        return rollout.grid, {}


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


