"""Research variants plugged into the PPO core, each one module plus a registration
(:mod:`~rlkit.variants.registry`): :mod:`~rlkit.variants.outer` (Outer-PPO, an update hook),
:mod:`~rlkit.variants.hp3o` (HP3O, a batch source) and :mod:`~rlkit.variants.group` (RLOO and
GRPO, critic-free advantages for the token env). :mod:`~rlkit.variants.base` says what a variant
may plug in. Importing this package registers the built-in variants, imports the plug-ins named
by ``rlkit.variants`` entry points and ``RLKIT_VARIANTS``, and builds :data:`VariantGroups`."""

# Each import registers a variant; registration order is the order of hooks and of run labels.
from rlkit.variants import outer as _outer  # noqa: F401  isort: skip
from rlkit.variants import hp3o as _hp3o  # noqa: F401  isort: skip
from rlkit.variants import group as _group  # noqa: F401  isort: skip
from rlkit.variants.base import BatchSource, Passes, UpdateHook, VariantState, load_variant_states, save_variant_states
from rlkit.variants.registry import (Plug, PlugContext, Plugs, Variant, groups_class, load_plugins, register_hook,
                                     register_variant, registered, unregister_hook)

load_plugins()
VariantGroups = groups_class()
"""The options container every trainer config holds: one group per registered variant."""
VariantOptions = VariantGroups
"""The same container under its earlier name (``rlkit.VariantOptions(outer_lr=1.5)`` still works)."""


def variant_fields() -> tuple[str, ...]:
    """Every variant option, in registration order (hparams tables lead with them)."""
    return tuple(name for v in registered().values() for name in v.options.__dataclass_fields__)


__all__ = ["BatchSource", "Passes", "Plug", "PlugContext", "Plugs", "UpdateHook", "Variant", "VariantGroups",
           "VariantOptions", "VariantState", "load_variant_states", "register_hook", "register_variant", "registered",
           "save_variant_states", "unregister_hook", "variant_fields"]
