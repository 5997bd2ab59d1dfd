"""A run's learner with its variants plugged in (what the trainers build before their first update)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from rlkit.core.learner import Learner
from rlkit.core.optim import FlatParameters, Optimizer
from rlkit.variants.registry import PlugContext


class Plugged(NamedTuple):
    learner: Learner
    group_size: int
    """Consecutive sub-environments that start from the same state (a variant's groups)."""


def build_learner(trainer: str, cfg: Any, flat: FlatParameters, optimizer: Optimizer, device: torch.device,
                  model: nn.Module, default_source: Any, generator_device: torch.device | None = None) -> Plugged:
    """The :class:`Learner` of a run of ``trainer`` (``gym`` or ``rlhf``): its random streams
    seeded with ``cfg.seed``, and the hooks and batch source of ``cfg.variants`` (the trainer's
    ``default_source`` when no variant brings one). The generator lives on ``generator_device``
    (default: ``device``)."""
    rng = np.random.default_rng(cfg.seed)
    plugs = cfg.variants.build(PlugContext(trainer, flat, cfg.ppo, cfg.num_envs, rng, device, model))
    generator = torch.Generator(generator_device or device).manual_seed(cfg.seed)
    return Plugged(Learner(flat, optimizer, generator, rng, list(plugs.hooks), plugs.source or default_source),
                   plugs.group_size)
