"""A run's learner with its variants plugged in (what the trainers build before their first update)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from rlkit.core.learner import Learner
from rlkit.core.objective import CLIPPED_SURROGATE
from rlkit.core.optim import FlatParameters, Optimizer
from rlkit.variants.base import require_end_takes_stats
from rlkit.variants.registry import PlugContext


class Plugged(NamedTuple):
    learner: Learner
    group_size: int
    """Consecutive sub-environments that start from the same state (a variant's groups)."""


def build_learner(trainer: str, cfg: Any, flat: FlatParameters, optimizer: Optimizer, device: torch.device,
                  model: nn.Module, default_source: Any, generator_device: torch.device | None = None) -> Plugged:
    """The :class:`Learner` of a run of ``trainer`` (``gym`` or ``rlhf``): its random streams
    seeded with ``cfg.seed``, and the hooks, batch source and objective of ``cfg.variants`` (the
    trainer's ``default_source`` when no variant brings one, PPO's clipped surrogate when no
    variant brings an objective). The generator lives on ``generator_device`` (default: ``device``)."""
    rng = np.random.default_rng(cfg.seed)
    plugs = cfg.variants.build(PlugContext(trainer, flat, cfg.ppo, cfg.num_envs, rng, device, model,
                                           getattr(cfg, "max_new_tokens", 0)))
    require_end_takes_stats(plugs.hooks)
    generator = torch.Generator(generator_device or device).manual_seed(cfg.seed)
    learner = Learner(flat, optimizer, generator, rng, list(plugs.hooks), plugs.source or default_source,
                      plugs.objective or CLIPPED_SURROGATE)
    return Plugged(learner, plugs.group_size)
