"""Each trainer's variant options container: one options group per variant the trainer offers,
holding the options it honours (:meth:`~rlkit.variants.registry.Variant.honours`). A trainer's
config, its ``--help`` and its records hold nothing else; an option it refuses, named anyway
(``RLHFConfig(hp3o_plus=True)``), is a one-line error, and at its default (a record written
with every option) it is dropped (:class:`rlkit.core.composed.Refused`).

Where a trainer honours only some of a variant's options, its group is a class of those
(same names, types, defaults and help); the variant's own code (validation, label, checks,
builders) always receives the variant's options class, the others at their defaults.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from typing_extensions import Doc

from rlkit.core.composed import Refused, composed_getattr, composed_replace, flat_init
from rlkit.core.config import deferred_validation, field_docs, field_hints, validation_enabled
from rlkit.errors import ConfigError
from rlkit.variants.registry import (LABEL, TRAINERS, Plug, PlugContext, Variant, close_registration, extra_hooks,
                                     plugin_call, plugin_errors, registered)

if TYPE_CHECKING:
    from rlkit.core.objective import Objective
    from rlkit.variants.base import BatchSource, UpdateHook


@dataclass(frozen=True)
class Plugs:
    """Everything the enabled variants add to one trainer."""

    hooks: list[UpdateHook]
    source: BatchSource | None
    """The one variant batch source (None: the trainer's latest rollout)."""
    group_size: int
    critic: bool
    """Whether the trainer needs a value function."""
    objective: Objective | None = None
    """The one variant objective (None: PPO's clipped surrogate)."""


class GroupsMethods:
    """The behaviour of an options container (its fields are made by :func:`variant_groups`)."""

    TRAINER: ClassVar[str]
    """The trainer kind whose options these are (``gym``, ``rlhf``)."""
    REFUSED: ClassVar[dict[str, Refused]]
    """Every registered option the trainer does not honour -> why."""

    def __post_init__(self) -> None:
        if validation_enabled():
            self.validate()

    def __getattr__(self, name: str) -> Any:
        return composed_getattr(self, name)

    def offered(self) -> list[Variant]:
        """The variants this trainer offers, in registration order."""
        return [v for v in registered().values() if v.name in self.__dataclass_fields__]  # type: ignore[attr-defined]

    def options(self, variant: Variant) -> Any:
        """``variant``'s options as its own class (the options this trainer refuses at their defaults)."""
        group = getattr(self, variant.name)
        return group if type(group) is variant.options else group.full()

    def enabled(self) -> list[Variant]:
        """The variants this configuration turns on, in registration order."""
        return [v for v in self.offered() if getattr(self, v.name).enabled]

    def validate(self) -> None:
        """One-line :class:`ConfigError` on an invalid group or a combination that cannot run."""
        if plugin_errors():
            raise ConfigError(plugin_errors()[0])
        for v in self.offered():
            group, expected = getattr(self, v.name), type(self).__dataclass_fields__[v.name].type  # type: ignore[attr-defined]
            if not isinstance(group, expected):
                raise ConfigError(f"variants.{v.name} must be {expected.__name__}, got {type(group).__name__}")
            plugin_call(v, "validate", self.options(v).validate)
        _ = self.name  # every enabled variant's label is checked here, before anything is written
        sources = [v.name for v in self.enabled() if v.replaces_batch]
        if len(sources) > 1:
            raise ConfigError(f"variants {' and '.join(sources)} both choose what the epochs train on; use one")
        objectives = [v.name for v in self.enabled() if v.replaces_objective]
        if len(objectives) > 1:
            raise ConfigError(f"variants {' and '.join(objectives)} both replace the policy objective (an objective "
                              "cannot be combined with one it cannot stack with); use one")

    @property
    def name(self) -> str:
        """Short name of the configuration: the enabled variants' labels joined by ``+`` (``ppo``: none)."""
        labels = []
        for v in self.enabled():
            label = plugin_call(v, "label", lambda v=v: v.label(self.options(v)))
            if not isinstance(label, str) or not LABEL.fullmatch(label) or label == "ppo":
                raise ConfigError(f"variant {v.name}'s label must be a non-empty name of letters, digits and . _ - + "
                                  f"(not 'ppo'), got {label!r}")
            labels.append(label)
        return "+".join(labels) or "ppo"

    @property
    def critic(self) -> bool:
        return all(v.critic for v in self.enabled())

    def replace(self, **overrides: object) -> Any:
        return composed_replace(self, overrides)

    def check(self, cfg: object) -> None:
        """The enabled variants' own checks against the trainer's config ``cfg`` (one-line errors)."""
        for v in self.enabled():
            if self.TRAINER in v.checks:
                v.checks[self.TRAINER](self.options(v), cfg)

    def build(self, ctx: PlugContext) -> Plugs:
        """Hooks, batch source, group size and objective of the enabled variants for ``ctx.trainer``."""
        build = ctx.trainer + " builder"
        plugs = [plugin_call(v, build, lambda v=v: v.builder(ctx.trainer)(self.options(v), ctx))
                 for v in self.enabled()]
        for v, plug in zip(self.enabled(), plugs):
            if not isinstance(plug, Plug):
                raise ConfigError(f"variant {v.name}'s {build} returned {type(plug).__name__}, not a Plug")
            if (plug.objective is not None) != v.replaces_objective:
                raise ConfigError(f"variant {v.name}'s {build} must return an objective exactly when the variant "
                                  "declares replaces_objective")
        extra = [factory(self, ctx.flat) for factory in extra_hooks()]
        hooks = [h for p in plugs for h in p.hooks] + [h for h in extra if h is not None]
        sources = [p.source for p in plugs if p.source is not None]
        objectives = [p.objective for p in plugs if p.objective is not None]
        return Plugs(hooks, sources[0] if sources else None, max([p.group_size for p in plugs], default=1),
                     self.critic, objectives[0] if objectives else None)


def options_class(variant: Variant, trainer: str) -> type:
    """The options group ``trainer``'s container holds for ``variant``: the variant's own class
    where the trainer honours all its options, else a class of the honoured ones whose ``full()``
    is the variant's options with the others at their defaults."""
    kept = variant.honours(trainer)
    own = dataclasses.fields(variant.options)
    if len(kept) == len(own):
        return variant.options
    hints, docs = field_hints(variant.options), field_docs(variant.options)
    fields = [(f.name, Annotated[hints[f.name], Doc(docs.get(f.name, ""))], field(default=f.default))
              for f in own if f.name in kept]

    def full(self: Any) -> Any:
        with deferred_validation():  # validated where it is used (a plug-in's failure is one line there)
            return variant.options(**{name: getattr(self, name) for name in kept})

    def validate(self: Any) -> None:
        """One-line :class:`ConfigError` on an invalid or inconsistent setting (the variant's own checks)."""
        self.full().validate()

    def __post_init__(self: Any) -> None:
        if validation_enabled():
            self.validate()

    namespace = {"__doc__": variant.options.__doc__, "full": full, "validate": validate,
                 "__post_init__": __post_init__, "enabled": property(lambda self: self.full().enabled)}
    if hasattr(variant.options, "turn_on"):
        namespace["turn_on"] = variant.options.turn_on
    cls = dataclasses.make_dataclass(f"{variant.options.__name__}For{TRAINERS[trainer]}", fields, frozen=True,
                                     namespace=namespace)
    cls.__module__ = __name__
    return cls


@functools.cache
def variant_groups(trainer: str) -> type:
    """The options container of ``trainer`` (``gym``, ``rlhf``): one group per variant it offers,
    with the options it honours. Building the first closes registration."""
    close_registration()
    offered = [v for v in registered().values() if v.honours(trainer)]
    groups = {v.name: options_class(v, trainer) for v in offered}
    refused = {f.name: Refused(f.default, v.refusal(trainer, f.name)) for v in registered().values()
               for f in dataclasses.fields(v.options) if f.name not in v.honours(trainer)}
    name = "VariantGroups" if trainer == "gym" else f"{TRAINERS[trainer]}VariantGroups"
    cls = dataclasses.make_dataclass(
        name, [(n, group, field(default_factory=group)) for n, group in groups.items()], bases=(GroupsMethods,),
        frozen=True, namespace={"__doc__": f"The {TRAINERS[trainer]} trainer's variant options: one group per "
                                           "variant it offers (--help shows each as a group; flags stay flat).",
                                "TRAINER": trainer, "REFUSED": refused})
    cls.__module__ = __name__
    return flat_init(cls)
