"""Research variants plugged into the PPO core: :mod:`~rlkit.variants.outer` (Outer-PPO, an
update hook) and :mod:`~rlkit.variants.hp3o` (HP3O, a batch source). :mod:`~rlkit.variants.base`
says what a variant may plug in; importing this package registers the built-in hooks."""

from rlkit.variants import outer as _outer  # noqa: F401  (registers the Outer-PPO hook)
from rlkit.variants.base import (BatchSource, Passes, UpdateHook, VariantState, build_hooks, load_variant_states,
                                 register_hook, save_variant_states, unregister_hook)
from rlkit.variants.options import VariantOptions

VARIANT_FIELDS = tuple(VariantOptions.__dataclass_fields__)
"""The variant switches, in declaration order (hparams tables lead with them)."""

__all__ = ["VARIANT_FIELDS", "BatchSource", "Passes", "UpdateHook", "VariantOptions", "VariantState", "build_hooks", "load_variant_states",
           "register_hook", "save_variant_states", "unregister_hook"]
