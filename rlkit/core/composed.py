"""How a trainer's config composes the PPO hyperparameters, the variant options and its own
groups while reading and writing as one flat record.

A trainer's config holds sub-configs as fields (its groups such as ``run``, ``ppo: PPOConfig``,
and ``variants`` with one options group per variant the trainer offers). Flags stay flat (``--clip-coef``, ``--outer-lr``: tyro's
argument prefixes are omitted) while ``--help`` shows each sub-config as a group; fields read
flat (``cfg.clip_coef``), overrides are flat (``cfg.replace(clip_coef=0.1)``), and ``to_dict`` /
``from_dict`` write and read the flat JSON record stored in ``config.json`` and in checkpoints.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, get_origin

from rlkit.core.config import (deferred_validation, field_hints, require_field_types, require_seed,
                               validation_enabled)
from rlkit.errors import ConfigError

C = TypeVar("C")


# A composed config holds sub-configs (frozen dataclasses, nested to any depth: ``ppo``, and
# ``variants`` with one options group per registered variant). Their leaf fields read, override
# and serialize flat: ``cfg.clip_coef``, ``cfg.replace(outer_lr=1.5)``, one flat JSON record.
@functools.cache
def sub_configs(cls: type) -> dict[str, type | None]:
    """Each field of a config class -> the dataclass it holds as a sub-config (None: a plain field)."""
    out: dict[str, type | None] = {}
    for f in dataclasses.fields(cls):
        factory = f.default_factory
        value = factory() if callable(factory) else None
        out[f.name] = type(value) if dataclasses.is_dataclass(value) else None
    return out


@functools.cache
def flat_field_names(cls: type) -> dict[str, tuple[str, ...]]:
    """Every leaf field name -> the path of sub-config fields holding it (``()``: the config's own)."""
    names: dict[str, tuple[str, ...]] = {}
    for name, sub in sub_configs(cls).items():
        leaves = {name: ()} if sub is None else {k: (name, *path) for k, path in flat_field_names(sub).items()}
        for leaf, path in leaves.items():
            if leaf in names:  # flat flags and records need every leaf name once
                first, second = (".".join(p) or cls.__name__ for p in (names[leaf], path))
                raise ConfigError(f"config field {leaf!r} is defined twice ({first} and {second})")
            names[leaf] = path
    return names


def leaf_hint(cls: type, name: str) -> Any:
    """The annotation of the leaf field ``name`` of a composed config class (in whichever sub-config holds it)."""
    for sub in flat_field_names(cls)[name]:
        cls = sub_configs(cls)[sub]  # type: ignore[assignment]
    return field_hints(cls)[name]


@dataclass(frozen=True)
class Refused:
    """A field a composed config leaves out though a caller or a stored record may name it (a
    variant option its trainer does not honour): at its ``default`` it is dropped, any other
    value is refused with ``reason``."""

    default: Any
    reason: str
    """Why the config does not hold it, in a few words (a one-line error)."""


@functools.cache
def refused_fields(cls: type) -> dict[str, Refused]:
    """Every field ``cls`` and its sub-configs leave out (their ``REFUSED`` class attributes)."""
    out = dict(getattr(cls, "REFUSED", {}))
    for sub in sub_configs(cls).values():
        if sub is not None:
            out.update(refused_fields(sub))
    return out


def _drop_refused(cls: type, overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` without the fields ``cls`` leaves out at their defaults; one set otherwise
    is a one-line :class:`ConfigError`."""
    refused = refused_fields(cls)
    for key, value in overrides.items():
        if key in refused and value != refused[key].default:
            raise ConfigError(f"{refused[key].reason}; leave {key} at its default")
    return {k: v for k, v in overrides.items() if k not in refused}


def _route(cls: type, overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Split flat overrides into the config's own fields and each sub-config's. A sub-config's
    name with a dataclass value replaces it whole; a leaf name reaches its sub-config."""
    names = flat_field_names(cls)
    fields = sub_configs(cls)
    own: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    unknown = []
    for key, value in _drop_refused(cls, overrides).items():
        if fields.get(key) is not None and dataclasses.is_dataclass(value) and not isinstance(value, type):
            own[key] = value
        elif names.get(key):
            nested.setdefault(names[key][0], {})[key] = value
        elif fields.get(key) is not None:  # not a dataclass: the type check names what it should be
            own[key] = value
        elif key in fields and fields[key] is None:
            is_tuple = get_origin(field_hints(cls).get(key)) is tuple
            own[key] = tuple(value) if is_tuple and isinstance(value, list) else value  # JSON / TOML lists
        else:
            unknown.append(key)
    if unknown:
        raise ConfigError(f"unknown config field(s): {', '.join(sorted(map(str, unknown)))}")
    return own, nested


def flat_init(cls: type[C]) -> type[C]:
    """Class decorator: the dataclass constructor also takes the sub-configs' fields flat,
    ``TrainConfig(env=..., learning_rate=3e-4, outer_lr=1.5)``. (The signature tools see stays
    the generated one, so tyro builds the nested form.)"""
    generated = cls.__init__

    @functools.wraps(generated)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        own, nested = _route(cls, kwargs)
        defaults = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        for part, sub in nested.items():
            base = own[part] if part in own else defaults[part].default_factory()  # type: ignore[misc]
            own[part] = composed_replace(base, sub)
        generated(self, *args, **own)

    cls.__init__ = __init__  # type: ignore[assignment]
    return cls


def composed_getattr(cfg: object, name: str) -> Any:
    """Flat read access to a leaf field of a composed sub-config (``cfg.clip_coef``)."""
    path = flat_field_names(type(cfg)).get(name)
    if not path:
        raise AttributeError(f"{type(cfg).__name__!r} object has no attribute {name!r}")
    value = cfg
    for part in path:
        value = object.__getattribute__(value, part)
    return getattr(value, name)


def composed_replace(cfg: C, overrides: dict[str, Any]) -> C:
    """A copy of ``cfg`` with flat field overrides routed to their sub-configs (validated again)."""
    own, nested = _route(type(cfg), overrides)
    for part, sub in nested.items():
        own[part] = composed_replace(own.get(part, getattr(cfg, part)), sub)
    try:
        return dataclasses.replace(cfg, **own)  # type: ignore[type-var]
    except TypeError as exc:
        raise ConfigError(f"bad config: {exc}") from None


def composed_to_dict(cfg: object) -> dict[str, Any]:
    """The flat record: the config's own fields with each sub-config's leaf fields in place."""
    out: dict[str, Any] = {}
    for name, sub in sub_configs(type(cfg)).items():
        value = getattr(cfg, name)
        out.update(composed_to_dict(value) if sub is not None else {name: value})
    return out


def composed_from_dict(cls: type[C], data: dict[str, Any]) -> C:
    """Inverse of :func:`composed_to_dict` (JSON lists back to tuples); unknown fields are an error."""
    names = flat_field_names(cls)
    data = _drop_refused(cls, data)
    unknown = set(data) - set(names)
    if unknown:
        raise ConfigError(f"unknown config field(s): {', '.join(sorted(unknown))}")
    types = {f.name: f.type for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    data = {k: tuple(v) if isinstance(v, list) and "tuple" in str(types.get(k, "")) else v for k, v in data.items()}
    with deferred_validation():
        base = cls(**{k: v for k, v in data.items() if not names[k]})
    return composed_replace(base, {k: v for k, v in data.items() if names[k]})


NOT_SHOWN = ("logdir", "run_name", "resume", "progress", "hparams")
"""Fields a run's key settings leave out however they are set: where the run goes, its progress bar."""


class ComposedConfig:
    """What every trainer config shares: composed sub-configs read, override and serialize as
    flat fields, validation on construction, the run checks (run name, seed, device), the
    variant's short name and the settings its TensorBoard hparams show. A config adds its own
    fields, ``validate_own`` and ``KEY_HPARAMS``."""

    KEY_HPARAMS: ClassVar[tuple[str, ...]] = ("seed",)
    """The settings TensorBoard's HPARAMS tab shows for every run of this config, after its variant."""

    def shown_hparams(self) -> tuple[str, ...]:
        """The fields TensorBoard's HPARAMS tab shows for this run, after its variant's name: the
        config's ``hparams`` where it has them and they are set (a sweep's: what differs within
        it), else its key settings: :attr:`KEY_HPARAMS`, the options of the variants it turns on
        and every other field set away from its default (:data:`NOT_SHOWN` aside)."""
        named = tuple(getattr(self, "hparams", ()) or ())
        if named:
            return named
        with deferred_validation():
            default = type(self)().to_dict()
        options = [f.name for v in self.variants.enabled()  # type: ignore[attr-defined]
                   for f in dataclasses.fields(getattr(self.variants, v.name))]  # type: ignore[attr-defined]
        changed = [k for k, value in self.to_dict().items() if k not in NOT_SHOWN and value != default.get(k)]
        return tuple(dict.fromkeys([*self.KEY_HPARAMS, *options, *changed]))

    def __post_init__(self) -> None:
        if validation_enabled():
            self.validate()

    def __getattr__(self, name: str) -> Any:
        return composed_getattr(self, name)

    def validate(self) -> None:
        """Raise :class:`ConfigError` (one line, naming the field) on any malformed value."""
        from rlkit.core.device import check_device
        from rlkit.io.checkpoint import check_run_name

        require_field_types(self)  # the config's own fields and the sub-configs' classes
        for name, sub in sub_configs(type(self)).items():
            if sub is not None:
                getattr(self, name).validate()
        if self.run_name is not None:  # type: ignore[attr-defined]
            check_run_name(self.run_name)  # type: ignore[attr-defined]
        require_seed(self.seed)  # type: ignore[attr-defined]
        check_device(self.device)  # type: ignore[attr-defined]
        self.validate_own()

    def validate_own(self) -> None:
        """The config's own checks."""

    @property
    def variant(self) -> str:
        """The variant's short name (``ppo``, ``outer-lr1.5``, ``hp3o+``, ...)."""
        return self.variants.name  # type: ignore[attr-defined]

    def replace(self: C, **overrides: object) -> C:
        """A copy with some (flat) fields changed, validated again."""
        return composed_replace(self, overrides)

    def to_dict(self) -> dict[str, object]:
        """The flat record written to ``config.json`` and checkpoints."""
        return composed_to_dict(self)

    @classmethod
    def from_dict(cls: type[C], data: dict[str, object]) -> C:
        """Inverse of :meth:`to_dict` (JSON lists back to tuples); unknown fields are an error."""
        return composed_from_dict(cls, data)
