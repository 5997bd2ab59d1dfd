"""Research variants plugged into the PPO core, each one module plus a registration
(:mod:`~rlkit.variants.registry`): :mod:`~rlkit.variants.outer` (Outer-PPO, an update hook),
:mod:`~rlkit.variants.hp3o` (HP3O, a batch source), :mod:`~rlkit.variants.group` (RLOO and
GRPO, critic-free advantages for the token env) and the PPO paper's other objectives
(:mod:`~rlkit.variants.no_clip`, :mod:`~rlkit.variants.kl_fixed`, :mod:`~rlkit.variants.kl_adaptive`).
:mod:`~rlkit.variants.base` says what a variant may plug in. Importing this package registers the built-in variants, imports the plug-ins named
by ``rlkit.variants`` entry points and ``RLKIT_VARIANTS``, and builds :data:`VariantGroups`."""

from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from rlkit.core.learner import Learner
from rlkit.core.objective import CLIPPED_SURROGATE
from rlkit.core.optim import FlatParameters, Optimizer

# Each import registers a variant; registration order is the order of hooks and of run labels.
from rlkit.variants import outer as _outer  # noqa: F401  isort: skip
from rlkit.variants import hp3o as _hp3o  # noqa: F401  isort: skip
from rlkit.variants import group as _group  # noqa: F401  isort: skip
from rlkit.variants import no_clip as _no_clip  # noqa: F401  isort: skip
from rlkit.variants import kl_fixed as _kl_fixed  # noqa: F401  isort: skip
from rlkit.variants import kl_adaptive as _kl_adaptive  # noqa: F401  isort: skip
from rlkit.variants.base import BatchSource, Passes, UpdateHook, VariantState, require_end_takes_stats
from rlkit.variants.registry import (Plug, PlugContext, Plugs, Variant, groups_class, load_plugins, register_hook,
                                     register_variant, registered, unregister_hook, variant_options, variant_presets)

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
    seeded with ``cfg.seed``, and the hooks, batch source and objective of ``cfg.variants`` (the
    trainer's ``default_source`` when no variant brings one, PPO's clipped surrogate when no
    variant brings an objective). The generator lives on ``generator_device`` (default: ``device``)."""
    rng = np.random.default_rng(cfg.seed)
    plugs = cfg.variants.build(PlugContext(trainer, flat, cfg.ppo, cfg.num_envs, rng, device, model))
    require_end_takes_stats(plugs.hooks)
    generator = torch.Generator(generator_device or device).manual_seed(cfg.seed)
    learner = Learner(flat, optimizer, generator, rng, list(plugs.hooks), plugs.source or default_source,
                      plugs.objective or CLIPPED_SURROGATE)
    return Plugged(learner, plugs.group_size)


__all__ = ["BatchSource", "Passes", "Plug", "PlugContext", "Plugged", "Plugs", "UpdateHook", "Variant",
           "VariantGroups", "VariantState", "build_learner", "register_hook", "register_variant", "registered",
           "unregister_hook", "variant_fields", "variant_options", "variant_presets"]
