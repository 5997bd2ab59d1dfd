"""The variant registry: what a variant declares, and which trainer honours which of its options.

A variant is one module that calls :func:`register_variant` with a :class:`Variant`: its options
(a frozen dataclass whose documented fields are its ``--help`` group and flat flags), its short
run label, and a builder per trainer it supports (a function, or ``"module:function"`` imported
when a run is built, so the options and ``--help`` never import what the variant runs). What a
trainer honours is declared here once (:meth:`Variant.honours`: the trainers it builds for,
less the options it declares ``unsupported`` there); each trainer's options container
(:mod:`rlkit.variants.containers`) holds exactly that, so ``--help`` lists it and nothing else.

The containers are built once when :mod:`rlkit.variants` is imported: the built-in variants,
then every module named by the ``rlkit.variants`` entry-point group or the ``RLKIT_VARIANTS``
environment variable (comma-separated module names or paths of ``.py`` files). A group left at
its defaults is off; setting any of its options turns the variant on (each options class says so
in its ``enabled`` property).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Union

from rlkit.core.config import PPOConfig, require_field_types, validation_enabled
from rlkit.errors import ConfigError

if TYPE_CHECKING:  # what a run hands its variants; registering one imports none of it
    import numpy as np
    import torch
    from torch import nn

    from rlkit.core.objective import Objective
    from rlkit.core.optim import FlatParameters
    from rlkit.variants.base import BatchSource, UpdateHook

TRAINERS = {"gym": "Gymnasium", "rlhf": "RLHF"}
"""The trainer kinds a variant may build for (Gymnasium envs, the token-level LLM env) and their names."""


class Options(Protocol):
    """What a variant's options dataclass provides (besides its documented fields)."""

    @property
    def enabled(self) -> bool: ...

    def validate(self) -> None: ...


def any_set(options: object) -> bool:
    """True when any field of ``options`` differs from its default (the usual ``enabled``)."""
    return any(getattr(options, f.name) != f.default for f in dataclasses.fields(options))  # type: ignore[arg-type]


def variant_options(cls: type) -> type:
    """Class decorator for a variant's options: a frozen dataclass validated on construction
    (unless validation is deferred), whose ``Literal`` fields are checked before the class's own
    ``validate``, and whose ``enabled`` is :func:`any_set` unless the class defines it."""
    own_validate = cls.__dict__.get("validate", lambda self: None)

    def validate(self: Any) -> None:
        """One-line :class:`ConfigError` on an invalid or inconsistent setting."""
        require_field_types(self)
        own_validate(self)

    def __post_init__(self: Any) -> None:
        if validation_enabled():
            self.validate()

    cls.validate, cls.__post_init__ = validate, __post_init__  # type: ignore[attr-defined]
    if "enabled" not in cls.__dict__:
        cls.enabled = property(any_set)  # type: ignore[attr-defined]
    return dataclass(frozen=True)(cls)


@dataclass(frozen=True)
class PlugContext:
    """What a trainer offers a variant's builder (named, so builders never receive the trainer)."""

    trainer: str
    """``gym`` or ``rlhf``."""
    flat: FlatParameters
    """The trainable parameters as the one flat vector the optimizer steps."""
    ppo: PPOConfig
    num_envs: int
    rng: np.random.Generator
    """The run's numpy stream (a variant's random choices draw from it, so runs repeat)."""
    device: torch.device
    model: nn.Module
    max_sequence: int = 0
    """The longest sequence a rollout holds where the trainer has sequences (``max_new_tokens`` on
    the token env); 0 otherwise."""


@dataclass(frozen=True)
class Plug:
    """What one variant adds to a trainer."""

    hooks: tuple[UpdateHook, ...] = ()
    """Run around the inner epochs of every update, in registration order."""
    source: BatchSource | None = None
    """What the epochs train on (None: the trainer's latest rollout)."""
    group_size: int = 1
    """Consecutive sub-environments that start from the same state (the same prompt on the token env)."""
    objective: Objective | None = None
    """The policy objective every minibatch's loss is computed by (None: PPO's clipped surrogate);
    the variant declares ``replaces_objective``."""


Builder = Union[Callable[[Any, PlugContext], Plug], str]
"""What a variant adds to one trainer: ``build(options, ctx) -> Plug``, or the ``"module:function"``
naming it (imported when a run is built)."""


@dataclass(frozen=True)
class Variant:
    """A registered variant."""

    name: str
    """Registry key and the options group's field name."""
    options: type
    """Frozen dataclass of the variant's options (field names carry the variant's prefix)."""
    label: Callable[[Any], str]
    """Short name of a configuration in run names and hparams (``outer-lr1.5``, ``hp3o+``)."""
    builders: Mapping[str, Builder]
    """Trainer kind -> what the variant adds to that trainer (the trainers that offer the variant)."""
    unsupported: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Trainer kind -> options that trainer does not honour: its config and ``--help`` leave them
    out, and setting one is refused in one line (:meth:`honours`)."""
    checks: Mapping[str, Callable[[Any, Any], None]] = field(default_factory=dict)
    """Trainer kind -> ``check(options, trainer_config)``: one-line ConfigError when they do not fit."""
    replaces_batch: bool = False
    """The variant provides the batch source (at most one enabled variant may)."""
    replaces_objective: bool = False
    """The variant brings the policy objective (at most one enabled variant may)."""
    critic: bool = True
    """False: the variant needs no value function (the trainer builds none)."""
    presets: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    """Named settings for ``rlkit train --preset`` (e.g. the paper's): flat field names -> values,
    the variant's options and any PPO field, stacked on an env preset."""

    def honours(self, trainer: str) -> tuple[str, ...]:
        """The options ``trainer`` honours, in declaration order: none where the variant has no
        builder for it, else all but those declared ``unsupported`` there."""
        if trainer not in self.builders:
            return ()
        refused = set(self.unsupported.get(trainer, ()))
        return tuple(f.name for f in dataclasses.fields(self.options) if f.name not in refused)

    def refusal(self, trainer: str, option: str) -> str:
        """Why ``trainer`` refuses ``option`` (one of :meth:`honours`' complement), in one line."""
        if trainer not in self.builders:
            offered = " and ".join(TRAINERS[t] for t in self.builders) or "no"
            return f"variant {self.name} is not offered by the {TRAINERS[trainer]} trainer ({offered} trainer only)"
        others = [TRAINERS[t] for t in self.builders if t != trainer and option in self.honours(t)]
        where = f"{' and '.join(others)} trainer only" if others else "no trainer"
        return f"the {TRAINERS[trainer]} trainer does not honour {option} (variant {self.name}: {where})"

    def builder(self, trainer: str) -> Callable[[Any, PlugContext], Plug]:
        """The builder for ``trainer``, imported where it is named ``"module:function"``."""
        built = self.builders[trainer]
        if isinstance(built, str):
            module, _, name = built.partition(":")
            built = getattr(importlib.import_module(module), name)
        return built


LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
"""What a run label may hold (it becomes part of run directory names)."""
BUILDER_NAME = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
"""A builder named as ``"module:function"``."""
_VARIANTS: dict[str, Variant] = {}
_HOOKS: dict[str, Callable[[Any, FlatParameters], UpdateHook | None]] = {}
_CLOSED: list[bool] = [False]
_PLUGIN_ERRORS: list[str] = []


def register_variant(variant: Variant) -> None:
    """Register a variant with options. Options groups are fixed once :mod:`rlkit.variants` has
    imported, so a variant outside rlkit is named by an ``rlkit.variants`` entry point or by
    ``RLKIT_VARIANTS`` (its module is imported before the groups are built)."""
    if _CLOSED[0]:
        raise ConfigError(f"variant {variant.name!r} registered after the options groups were built; name its "
                          "module in RLKIT_VARIANTS or an 'rlkit.variants' entry point")
    unknown = set(variant.builders) - set(TRAINERS) | {t for t, b in variant.builders.items()
                                                       if isinstance(b, str) and not BUILDER_NAME.fullmatch(b)}
    if variant.name in _VARIANTS:
        raise ConfigError(f"cannot register variant {variant.name!r}: the name is taken by module "
                          f"{_VARIANTS[variant.name].options.__module__}; choose another name")
    if not variant.name.isidentifier() or variant.name in CONTAINER_ATTRIBUTES \
            or variant.name.startswith("_") or unknown:
        raise ConfigError(f"cannot register variant {variant.name!r}: the name must be a new identifier, not one "
                          "of the options container's attributes, and the builders' trainers among "
                          f"{', '.join(TRAINERS)} (each builder a function or 'module:function')")
    problem = _options_problem(variant)
    if problem:
        raise ConfigError(f"cannot register variant {variant.name!r}: {problem}")
    taken = {n: v.name for v in _VARIANTS.values() for n in v.options.__dataclass_fields__}
    taken.update({n: "ppo" for n in PPOConfig.__dataclass_fields__})
    clash = sorted(set(variant.options.__dataclass_fields__) & set(taken))
    if clash:
        raise ConfigError(f"cannot register variant {variant.name!r}: option {clash[0]!r} is already "
                          f"{taken[clash[0]]}'s")
    presets = {n: v.name for v in _VARIANTS.values() for n in v.presets}
    bad = [n for n in variant.presets if not isinstance(n, str) or not LABEL.fullmatch(n) or n in presets
           or n in RESERVED_PRESETS or not isinstance(variant.presets[n], Mapping)]
    if bad:
        raise ConfigError(f"cannot register variant {variant.name!r}: preset {bad[0]!r} must be a new plain name "
                          f"(not {', '.join(RESERVED_PRESETS)} or another variant's) naming a mapping of fields")
    _VARIANTS[variant.name] = variant


CONTAINER_ATTRIBUTES = frozenset({"TRAINER", "REFUSED", "offered", "options", "enabled", "validate", "name",
                                  "critic", "replace", "check", "build"})
"""What every options container has besides its groups (:class:`rlkit.variants.containers.GroupsMethods`):
no variant may take one as its name."""


RESERVED = ("ppo", "variants", "environment", "run", "evaluation", "compute", "model", "responses", "kl")
"""Names of the trainer configs' sub-configs: neither a variant nor an option may take them."""
RESERVED_PRESETS = ("ppo", "cartpole", "mujoco", "atari", "minatar")
"""Presets of the Gymnasium config itself (plain PPO and the env presets)."""


def _options_problem(variant: Variant) -> str | None:
    """What makes a variant's declaration unusable (None: nothing)."""
    cls = variant.options
    if variant.name in RESERVED or not variant.builders:
        return f"its name must not be {' or '.join(RESERVED)} and it needs a builder for a trainer"
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen):
        return "its options must be a frozen dataclass class (e.g. @variant_options)"
    fields = dataclasses.fields(cls)
    if any(f.default is dataclasses.MISSING for f in fields):
        return "every option needs a default (the default configuration is off)"
    if any(f.name in RESERVED for f in fields) or not callable(getattr(cls, "validate", None)) \
            or not hasattr(cls, "enabled"):
        return f"its options need validate() and enabled, and no option may be named {' or '.join(RESERVED)}"
    return None


def plugin_call(variant: Variant, what: str, call: Callable[[], Any]) -> Any:
    """A variant's own code (validate, label, builder): a failure of any kind is one line naming it."""
    try:
        return call()
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001  (a variant's bug must not reach the user as a traceback)
        raise ConfigError(f"variant {variant.name}'s {what} failed: {type(exc).__name__}: {exc}") from None


def register_hook(name: str, factory: Callable[[Any, FlatParameters], UpdateHook | None]) -> None:
    """An update hook without options of its own, any time: every trainer calls
    ``factory(variant_groups, flat)`` and keeps the hook it returns (None: not wanted)."""
    _HOOKS[name] = factory


def unregister_hook(name: str) -> None:
    _HOOKS.pop(name, None)


def registered() -> dict[str, Variant]:
    return dict(_VARIANTS)


def variant_presets() -> dict[str, dict[str, object]]:
    """Every registered variant's presets, in registration order."""
    return {name: dict(fields) for v in _VARIANTS.values() for name, fields in v.presets.items()}


def load_plugins() -> None:
    """Import the variant modules named by entry points and ``RLKIT_VARIANTS`` (comma-separated
    module names or ``.py`` files). A module that fails to import is reported by every config
    validation (a one-line error), not at import."""
    names = [(ep.value, False) for ep in entry_points(group="rlkit.variants")]
    names += [(n.strip(), True) for n in os.environ.get("RLKIT_VARIANTS", "").split(",") if n.strip()]
    for module, from_env in names:
        target = module.split(":")[0]
        try:
            if from_env and (target.endswith(".py") or os.sep in target or "/" in target):
                _import_file(target)
            else:
                importlib.import_module(target)
        except ModuleNotFoundError as exc:
            missing = exc.name and (target == exc.name or target.startswith(exc.name + "."))
            _PLUGIN_ERRORS.append(f"RLKIT_VARIANTS: no module {target!r} (is its folder on PYTHONPATH? a .py path "
                                  "works too)" if from_env and missing else
                                  f"cannot import variant module {module!r}: {type(exc).__name__}: {exc}")
        except _PluginError as exc:
            _PLUGIN_ERRORS.append(str(exc))
        except BaseException as exc:  # noqa: BLE001  (even SystemExit: a plug-in's failure is a one-line error)
            _PLUGIN_ERRORS.append(f"cannot import variant module {module!r}: {type(exc).__name__}: {exc}")


def _import_file(path: str) -> None:
    """Import a variant module from its ``.py`` file (relative to the working directory) as the
    module named by the file's stem, as ``python -m`` would name it; a one-line error when there is
    no such file or another module of that name is imported already."""
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise _PluginError(f"RLKIT_VARIANTS: no file {path!r} (a variant file is a .py path)")
    if file.suffix != ".py":
        raise _PluginError(f"RLKIT_VARIANTS: {path!r} is not a .py file; name a variant's .py file or its module")
    name = file.stem
    if not name.isidentifier():
        raise _PluginError(f"RLKIT_VARIANTS: {path!r}: {name!r} is not a module name (letters, digits, _)")
    known = sys.modules.get(name)
    if known is not None:
        if getattr(known, "__file__", None) and Path(known.__file__).resolve() == file:
            return
        raise _PluginError(f"RLKIT_VARIANTS: {path!r}: a module named {name!r} is imported already "
                           f"({getattr(known, '__file__', None) or 'built in'}); rename the file")
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module  # as an import does: dataclasses and pickling find it by name
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except BaseException:
        del sys.modules[name]
        raise


class _PluginError(Exception):
    """A ``RLKIT_VARIANTS`` entry that names no importable file (its message is the whole line)."""


def close_registration() -> None:
    """No variant registers from here on (the options containers are being built from the registry)."""
    _CLOSED[0] = True


def plugin_errors() -> list[str]:
    """What went wrong importing the variant modules named by entry points and ``RLKIT_VARIANTS``."""
    return list(_PLUGIN_ERRORS)


def extra_hooks() -> list[Callable[[Any, FlatParameters], UpdateHook | None]]:
    """The factories of :func:`register_hook`, in registration order."""
    return list(_HOOKS.values())
