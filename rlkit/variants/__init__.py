"""Research variants plugged into the PPO core, each one module plus a registration
(:mod:`~rlkit.variants.registry`): Outer-PPO (an update hook), HP3O (a batch source), the
group advantages RLOO and GRPO (critic-free, for the token env) and the PPO paper's other
objectives (the plain surrogate, fixed and adaptive KL penalties), an annealed clip range
(``anneal_clip``) and the RLHF loss's token aggregation (``loss_type``). Each variant's options, label
and registration live in a module of their own (:mod:`~rlkit.variants.outer_options`,
:mod:`~rlkit.variants.hp3o_options`, :mod:`~rlkit.variants.group_options`,
:mod:`~rlkit.variants.no_clip_options`, :mod:`~rlkit.variants.kl_fixed_options`,
:mod:`~rlkit.variants.kl_adaptive_options`, :mod:`~rlkit.variants.loss_type_options`,
:mod:`~rlkit.variants.anneal_clip_options`) that imports no torch; what it runs
(:mod:`~rlkit.variants.outer`, :mod:`~rlkit.variants.hp3o`, :mod:`~rlkit.variants.group`,
:mod:`~rlkit.variants.no_clip`, :mod:`~rlkit.variants.kl_fixed`, :mod:`~rlkit.variants.kl_adaptive`,
:mod:`~rlkit.variants.loss_type`, :mod:`~rlkit.variants.anneal_clip`)
is imported when a run builds it. :mod:`~rlkit.variants.base` says what a variant may plug in.
Importing this package registers the built-in variants, imports the plug-ins named by
``rlkit.variants`` entry points and ``RLKIT_VARIANTS``, and builds each trainer's options
container (:func:`variant_groups`; :data:`VariantGroups` is the Gymnasium trainer's)."""

from typing import Any

# Each import registers a variant; registration order is the order of hooks and of run labels.
from rlkit.variants import outer_options as _outer  # noqa: F401  isort: skip
from rlkit.variants import hp3o_options as _hp3o  # noqa: F401  isort: skip
from rlkit.variants import group_options as _group  # noqa: F401  isort: skip
from rlkit.variants import no_clip_options as _no_clip  # noqa: F401  isort: skip
from rlkit.variants import kl_fixed_options as _kl_fixed  # noqa: F401  isort: skip
from rlkit.variants import kl_adaptive_options as _kl_adaptive  # noqa: F401  isort: skip
from rlkit.variants import loss_type_options as _loss_type  # noqa: F401  isort: skip
from rlkit.variants import anneal_clip_options as _anneal_clip  # noqa: F401  isort: skip
from rlkit.variants.base import BatchSource, Passes, UpdateHook, VariantState
from rlkit.variants.containers import Plugs, variant_groups
from rlkit.variants.registry import (Plug, PlugContext, Variant, load_plugins, register_hook, register_variant,
                                     registered, unregister_hook, variant_options, variant_presets)

load_plugins()
VariantGroups = variant_groups("gym")
"""The Gymnasium trainer's options container: one group per variant it offers."""
RLHFVariantGroups = variant_groups("rlhf")
"""The RLHF trainer's options container."""


def variant_fields() -> tuple[str, ...]:
    """Every variant option, in registration order."""
    return tuple(name for v in registered().values() for name in v.options.__dataclass_fields__)


def __getattr__(name: str) -> Any:
    if name in ("Plugged", "build_learner"):  # torch: imported when a run builds its learner
        from rlkit.variants import plugged

        return getattr(plugged, name)
    raise AttributeError(f"module 'rlkit.variants' has no attribute {name!r}")


__all__ = ["BatchSource", "Passes", "Plug", "PlugContext", "Plugged", "Plugs", "RLHFVariantGroups", "UpdateHook",
           "Variant", "VariantGroups", "VariantState", "build_learner", "register_hook", "register_variant",
           "registered", "unregister_hook", "variant_fields", "variant_groups", "variant_options", "variant_presets"]
