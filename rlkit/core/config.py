"""The PPO hyperparameters every trainer shares, and the helpers that let a trainer's config
compose them (and the variant options) while reading and writing as one flat record.

A trainer's config holds sub-configs as fields (``ppo: PPOConfig``, and ``variants`` with one
options group per registered variant). Flags stay flat (``--clip-coef``, ``--outer-lr``: tyro's
argument prefixes are omitted) while ``--help`` shows each sub-config as a group; fields read
flat (``cfg.clip_coef``), overrides are flat (``cfg.replace(clip_coef=0.1)``), and ``to_dict`` /
``from_dict`` write and read the flat JSON record stored in ``config.json`` and in checkpoints.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import math
import textwrap
import types
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Iterator, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from rlkit.errors import ConfigError

_VALIDATE = contextvars.ContextVar("rlkit_validate_config", default=True)
C = TypeVar("C")


@contextlib.contextmanager
def deferred_validation() -> Iterator[None]:
    """Build configs without validating them (the CLI validates once parsing is done, so a bad
    value is reported as rlkit's one-line error rather than the parser's)."""
    token = _VALIDATE.set(False)
    try:
        yield
    finally:
        _VALIDATE.reset(token)


def validation_enabled() -> bool:
    return _VALIDATE.get()


@dataclass(frozen=True)
class PPOConfig:
    """PPO's update hyperparameters (Schulman et al. 2017; details as Huang et al. 2022)."""

    update_epochs: int = 4
    """Epochs over each batch."""
    num_minibatches: int = 4
    """Minibatches per epoch; must divide the batch."""
    learning_rate: float = 2.5e-4
    """Adam learning rate."""
    adam_eps: float = 1e-5
    """Adam epsilon: 1e-5 (the PPO implementations' detail, Huang et al. 2022) or torch's 1e-8."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the run."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    norm_adv: bool = True
    """Normalize advantages per minibatch."""
    clip_coef: float = 0.2
    """Surrogate clipping coefficient epsilon (also the value clip range)."""
    clip_vloss: bool = True
    """Clip the value loss around the rollout's values."""
    vloss_form: Literal["max", "clipped-mse"] = "max"
    """Value loss: max = 0.5 mean(max((V - R)^2, (V_clip - R)^2)) (OpenAI baselines, CleanRL);
    clipped-mse = mean((V_clip - R)^2), the clipped prediction only and no 0.5 (Stable-Baselines3,
    the HP3O authors' code). Without --clip-vloss: 0.5 mean((V - R)^2) or mean((V - R)^2)."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    target_kl: float | None = None
    """Stop the epochs of an update early once approx_kl exceeds this (None: never)."""

    def __post_init__(self) -> None:
        if _VALIDATE.get():
            self.validate()

    def validate(self) -> None:
        """Raise :class:`ConfigError` (one line, naming the field) on a malformed value."""
        for name in ("update_epochs", "num_minibatches"):
            require_positive_int(self, name)
        for name in ("learning_rate", "adam_eps", "clip_coef", "max_grad_norm"):
            value = getattr(self, name)
            if not _is_number(value) or not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a finite number > 0, got {value!r}")
        for name in ("ent_coef", "vf_coef"):
            value = getattr(self, name)
            if not _is_number(value) or not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a finite non-negative number, got {value!r}")
        for name in ("gamma", "gae_lambda"):
            value = getattr(self, name)
            if not _is_number(value) or not 0 <= value <= 1:
                raise ConfigError(f"{name} must lie in [0, 1], got {value!r}")
        if self.target_kl is not None and not (_is_number(self.target_kl) and math.isfinite(self.target_kl)
                                               and self.target_kl > 0):
            raise ConfigError(f"target_kl must be > 0 or None, got {self.target_kl!r}")
        require_field_types(self)


def config_group(cls: type[C]) -> type[C]:
    """Class decorator: a frozen dataclass of related fields a trainer config composes (one
    ``--help`` group, flat flags and record) whose ``validate`` checks its fields' types; the
    config checks their values."""
    cls.validate = require_field_types  # type: ignore[attr-defined]
    return dataclass(frozen=True)(cls)  # type: ignore[return-value]


def _is_number(value: object) -> bool:
    """An int or float (not a bool) that a float can hold."""
    if isinstance(value, bool):
        return False
    return isinstance(value, float) or (isinstance(value, int) and abs(value) < 2**1023)


ONE_RESPONSE = "response (which may end after its first token)"
"""What an RLHF minibatch of one sequence holds (``unit`` of :func:`require_minibatches`)."""


def require_minibatches(batch: int, num_minibatches: int, norm_adv: bool, batch_name: str,
                        unit: str = "sample") -> None:
    """One-line :class:`ConfigError` unless ``num_minibatches`` splits a batch of ``batch`` samples
    (named ``batch_name``; ``unit``: what one is) evenly, into at least two each when advantages are
    normalized per minibatch (the std of one value is undefined)."""
    if batch % num_minibatches:
        raise ConfigError(f"num_minibatches={num_minibatches} does not divide the batch {batch_name}={batch}")
    if norm_adv and batch < 2 * num_minibatches:
        raise ConfigError(f"num_minibatches={num_minibatches} makes minibatches of one {unit} of {batch_name}="
                          f"{batch}, whose advantages cannot be normalized; use fewer minibatches or --no-norm-adv")


def require_seed(seed: object) -> None:
    """Seeds are integers in [0, 2**32) (what numpy, torch and Gymnasium all accept)."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise ConfigError(f"seed must be an integer in [0, 2**32), got {seed!r}")


def checkpoint_cadence(checkpoint_every: int, steps_per_update: int) -> int:
    """Updates between checkpoints for ``checkpoint_every`` environment steps (0: none), when an
    update takes at most ``steps_per_update`` steps (the rollout's ``num_envs x steps``)."""
    return max(1, checkpoint_every // steps_per_update) if checkpoint_every else 0


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The help text of each field of a dataclass, on one line: the docstring under it in the
    class's source, else the ``Doc`` in its ``Annotated`` type (a class made at run time)."""
    docs = {name: " ".join(meta.documentation.split())
            for name, hint in get_type_hints(cls, include_extras=True).items() if get_origin(hint) is Annotated
            for meta in hint.__metadata__ if type(meta).__name__ == "Doc"}
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return docs
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    return {**docs, **{node.target.id: " ".join(after.value.value.split()) for node, after in zip(body, body[1:])
                       if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                       and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                       and isinstance(after.value.value, str)}}


@functools.cache
def field_hints(cls: type) -> dict[str, Any]:
    """Each field of a config class -> its resolved annotation."""
    hints = get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name in hints}


def type_problem(hint: Any, value: object) -> str | None:
    """What ``value`` should be to fit annotation ``hint`` (None: it fits, or the annotation is
    not one a config field checks: ``bool``, ``int``, ``float``, ``str``, ``None``, ``Literal``,
    ``tuple[X, ...]``, a dataclass and unions of these)."""
    origin = get_origin(hint)
    if hint is bool:
        return None if isinstance(value, bool) else "true or false"
    if hint is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    if hint is float:
        return None if _is_number(value) else "a number"
    if hint is str:
        return None if isinstance(value, str) else "a string"
    if hint is type(None):
        return None if value is None else "None"
    if origin is Literal:
        allowed = get_args(hint)
        return None if type(value) in map(type, allowed) and value in allowed else \
            f"one of {', '.join(map(str, allowed))}"
    if origin is tuple and len(get_args(hint)) == 2 and get_args(hint)[1] is Ellipsis:
        if not isinstance(value, tuple):
            return "a list"
        problems = [type_problem(get_args(hint)[0], v) for v in value]
        return next((f"a list whose every item is {p}" for p in problems if p), None)
    if origin in (Union, types.UnionType):
        problems = [type_problem(h, value) for h in get_args(hint)]
        return None if any(p is None for p in problems) else " or ".join(p for p in problems if p)
    if dataclasses.is_dataclass(hint):
        return None if isinstance(value, hint) else f"a {hint.__name__}"
    return None


def require_field_types(cfg: object) -> None:
    """One-line :class:`ConfigError` naming the first field whose value does not fit its
    annotation: the wrong type (``"false"`` for a flag, ``"1.5"`` for a number) or a value outside
    its ``Literal`` choices."""
    for name, hint in field_hints(type(cfg)).items():
        value = getattr(cfg, name)
        problem = type_problem(hint, value)
        if problem:
            shown = repr(value) if len(repr(value)) <= 60 else f"a {type(value).__name__}"
            raise ConfigError(f"{name} must be {problem}; got {shown}")


def require_positive_int(cfg: object, name: str) -> None:
    value = getattr(cfg, name)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def require_resume_path(cfg: object) -> None:
    """``resume`` is None or names a path (an empty one, e.g. an unset shell variable, would start a new run)."""
    value = getattr(cfg, "resume")
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(f"resume must name a run directory, got {value!r}")


# ---------------------------------------------------------------- composed configs
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
