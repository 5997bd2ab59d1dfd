"""Research variants plugged into the PPO core, each one module plus a registration
(:mod:`~rlkit.variants.registry`): :mod:`~rlkit.variants.outer` (Outer-PPO, an update hook),
:mod:`~rlkit.variants.hp3o` (HP3O, a batch source) and :mod:`~rlkit.variants.group` (RLOO and
GRPO, critic-free advantages for the token env). :mod:`~rlkit.variants.base` says what a variant
may plug in. Importing this package registers the built-in variants, imports the plug-ins named
by ``rlkit.variants`` entry points and ``RLKIT_VARIANTS``, and builds :data:`VariantGroups`."""

from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from rlkit.core.learner import Learner
from rlkit.core.optim import FlatParameters, Optimizer

# Each import registers a variant; registration order is the order of hooks and of run labels.
from rlkit.variants import outer as _outer  # noqa: F401  isort: skip
from rlkit.variants import hp3o as _hp3o  # noqa: F401  isort: skip
from rlkit.variants import group as _group  # noqa: F401  isort: skip
from rlkit.variants.base import BatchSource, Passes, UpdateHook, VariantState
from rlkit.variants.registry import (Plug, PlugContext, Plugs, Variant, groups_class, load_plugins, register_hook,
                                     register_variant, registered, unregister_hook, variant_presets)

load_plugins()
VariantGroups = groups_class()
"""The options container every trainer config holds: one group per registered variant."""


def variant_fields() -> tuple[str, ...]:
    """Every variant option, in registration order."""
    return tuple(name for v in registered().values() for name in v.options.__dataclass_fields__)


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


__all__ = ["BatchSource", "Passes", "Plug", "PlugContext", "Plugged", "Plugs", "UpdateHook", "Variant",
           "VariantGroups", "VariantState", "build_learner", "register_hook", "register_variant", "registered",
           "unregister_hook", "variant_fields", "variant_presets"]
