"""The PPO hyperparameters every trainer shares, and the checks every config runs: field types
against their annotations, seeds, minibatch sizes, each field's help text. How a trainer's config
composes its groups and reads, overrides and serializes them as one flat record is
:mod:`rlkit.core.composed`.
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
from typing import Annotated, Any, Iterator, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

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
    return not isinstance(value, bool) and (isinstance(value, float) or isinstance(value, int) and abs(value) < 2**1023)


FLOAT32_MAX = 3.4028234663852886e38
"""The largest float32: a config's numbers reach torch's float32 tensors, where a larger one is inf."""
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
        if _is_number(value) and not (math.isfinite(value) and abs(value) <= FLOAT32_MAX):  # type: ignore[arg-type]
            return f"a finite number of magnitude at most {FLOAT32_MAX:.4g} (float32's largest)"
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
