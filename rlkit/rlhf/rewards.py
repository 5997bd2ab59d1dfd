"""Reward functions as plain callables, TRL's convention: ``f(prompts=..., completions=..., **columns)``
returns one reward per completion, a number or ``None`` ("does not apply to this sample").

``prompts`` are the rows' prompts as the data holds them (a string or a conversation),
``completions`` the decoded responses, and every other column of the prompt data arrives as a
keyword argument of the same length (e.g. ``answer``); a function takes what it needs and ``**kwargs``.
Several sources combine as a weighted sum: the reward model (when one is set) first, then each
function in order. ``None`` counts as 0 in that sum (TRL sums with ``nansum``); a sample no source
applies to scores 0.

A function that raises, returns another number of values than completions, or a value that is
neither a finite number nor ``None`` is a :class:`RewardFunctionError` naming it. The trainer calls
the functions on the responses that end at each step of the rollout, so a call holds part of the
iteration's batch: a function scores each sample on its own.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import math
import numbers
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from rlkit.errors import ConfigError, RlkitError, one_line
from rlkit.io.signals import EnvStuck, SignalStop, env_wait, handlers_kept

RewardCallable = Callable[..., Sequence[Any]]
"""``f(prompts=[B], completions=[B], **columns) -> [B]`` numbers or None."""

MODEL_SOURCE = "reward_model"
"""The logged name of the reward model's scores."""


class RewardFunctionError(RlkitError, RuntimeError):
    """A reward function failed or returned what is not a reward."""

    resumable: bool = False
    """Whether the message ends with the command that continues the run (the command line then
    repeats the flags a resume was given)."""


@dataclass(frozen=True)
class RewardFunction:
    """One reward function and how it is named in logs and errors."""

    name: str
    """Its ``module:function`` (or ``file.py:function``) as given, or the callable's name."""
    fn: RewardCallable
    weight: float = 1.0
    """Its weight in the sum."""

    @property
    def log_name(self) -> str:
        """The function's own name: the tag under ``rewards/``."""
        return self.name.rpartition(":")[2] or self.name


def load_reward_function(spec: str, weight: float = 1.0) -> RewardFunction:
    """``module:function`` (an importable module) or ``path/to/file.py:function``; one line when
    it cannot be found."""
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name.isidentifier():
        raise ConfigError(f"--reward {spec!r}: expected module:function or path/to/file.py:function")
    try:
        module = _load_file(target) if target.endswith(".py") else importlib.import_module(target)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - any import failure of the user's module is one line naming it
        raise ConfigError(f"--reward {spec!r}: importing {target} raised {type(exc).__name__}: {one_line(exc)}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ConfigError(f"--reward {spec!r}: {target} has no function {name!r}")
    return RewardFunction(spec, fn, weight)


def resolve_reward_paths(specs: Sequence[str]) -> tuple[str, ...]:
    """``specs`` with each ``file.py:function`` whose file exists made absolute, so a run resumes
    from any working directory."""
    out = []
    for spec in specs:
        target, sep, name = spec.rpartition(":")
        out.append(f"{Path(target).resolve()}:{name}" if sep and target.endswith(".py") and Path(target).is_file()
                   else spec)
    return tuple(out)


@dataclass
class PendingScore:
    """One sub-env's reward: the score the trainer computed for its response in a batch, read
    once by the env when the response ends (``score_ids``, as the env reads a scorer)."""

    value: float | None = None

    def score_ids(self, sequences: Sequence[Sequence[int]]) -> np.ndarray:
        if self.value is None:
            raise RuntimeError("a response ended before the trainer scored it")
        value, self.value = self.value, None
        return np.array([value] * len(sequences))


def _load_file(path: str) -> Any:
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"--reward: file {path!r} not found")
    module_name = f"rlkit_reward_{abs(hash(str(file.resolve())))}"  # loaded afresh: the file as it is now
    spec = importlib.util.spec_from_file_location(module_name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


@dataclass(frozen=True)
class ScoredBatch:
    """The rewards of a batch of completions."""

    total: np.ndarray
    """``[B]`` the weighted sum (None counted as 0)."""
    per_source: dict[str, np.ndarray]
    """Source name -> ``[B]`` its unweighted rewards, NaN where it returned None."""


@dataclass
class RewardSet:
    """The weighted reward sources of a run and the per-source values of the current iteration."""

    functions: list[RewardFunction]
    model: Any = None
    """A scorer of token sequences (``score_ids``), e.g. :class:`rlkit.rlhf.reward_model.RewardModelScorer`."""
    model_weight: float = 1.0
    seen: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [MODEL_SOURCE] if self.model is not None else []
        for f in self.functions:
            if f.log_name in names:
                raise ConfigError(f"two reward sources are named {f.log_name!r}; give the functions distinct names")
            names.append(f.log_name)

    def score(self, prompts: list[Any], completions: list[str], columns: dict[str, list[Any]],
              sequences: list[list[int]]) -> ScoredBatch:
        """Score ``B`` completions of ``prompts`` (``sequences``: prompt + response token ids, for the
        reward model)."""
        per_source: dict[str, np.ndarray] = {}
        total = np.zeros(len(completions))
        if self.model is not None:
            per_source[MODEL_SOURCE] = np.asarray(self.model.score_ids(sequences), dtype=np.float64)
            total += self.model_weight * per_source[MODEL_SOURCE]
        for f in self.functions:
            values = _call(f, prompts, completions, columns)
            per_source[f.log_name] = values
            total += f.weight * np.nan_to_num(values, nan=0.0)
        if not (np.abs(total) <= LARGEST).all():
            raise RewardFunctionError(f"the weighted sum of the rewards reaches {np.abs(total).max():.3g}; the weights "
                                      "and rewards must keep it at most 1e30 in size")
        for name, values in per_source.items():
            self.seen.setdefault(name, []).append(values)
        return ScoredBatch(total, per_source)

    def take_stats(self) -> dict[str, float]:
        """``rewards/<source>/mean`` (over the samples it applied to; NaN when none) and
        ``rewards/<source>/applied`` (the share it applied to) since the last call."""
        stats: dict[str, float] = {}
        for name, batches in self.seen.items():
            values = np.concatenate(batches)
            applied = ~np.isnan(values)
            stats[f"rewards/{name}/mean"] = float(values[applied].mean()) if applied.any() else math.nan
            stats[f"rewards/{name}/applied"] = float(applied.mean())
        self.seen.clear()
        return stats


LARGEST = 1e30
"""The largest reward magnitude taken (the env's and the update's float32 hold far less than 1e38
after weights and sums); a larger one is an error naming the function."""


def _finite(v: Any) -> bool:
    try:
        return math.isfinite(float(v)) and abs(float(v)) <= LARGEST
    except (OverflowError, ValueError):
        return False


def _call(f: RewardFunction, prompts: list[Any], completions: list[str], columns: dict[str, list[Any]]) -> np.ndarray:
    """``[B]`` the function's rewards, NaN for None; anything else is a :class:`RewardFunctionError`.
    The function gets copies (what it changes in a prompt or a column is not seen by later calls),
    and after a stop signal it has as long as an environment's step to return (:class:`EnvStuck`)."""
    try:
        with env_wait(), handlers_kept():
            out = f.fn(prompts=copy.deepcopy(prompts), completions=list(completions), **copy.deepcopy(columns))
            # a generator (or map) does its work here: under the same stop grace and error handling
            values = list(out) if isinstance(out, Iterable) and not isinstance(out, (dict, str, bytes)) else None
    except EnvStuck as exc:
        exc.message = f"reward function {f.name} did not return within {exc.seconds:.0f} s of the stop signal"
        raise
    except SignalStop:  # a real stop signal arriving meanwhile: the run's to handle
        raise
    except (Exception, KeyboardInterrupt, SystemExit) as exc:  # noqa: BLE001 - the function's own failure, named
        hint = (f" (it receives prompts, completions and the prompt data's columns: {sorted(columns) or 'none'})"
                if isinstance(exc, TypeError) and "argument" in str(exc) else "")
        raise RewardFunctionError(f"reward function {f.name} raised {type(exc).__name__}: {one_line(exc)}{hint}"
                                  ) from None
    if values is None:
        raise RewardFunctionError(f"reward function {f.name} returned {type(out).__name__}, not a list of rewards")
    if len(values) != len(completions):
        raise RewardFunctionError(f"reward function {f.name} returned {len(values)} rewards for "
                                  f"{len(completions)} completions")
    rewards = np.empty(len(values))
    for i, v in enumerate(values):
        if v is None:
            rewards[i] = math.nan
        elif isinstance(v, numbers.Real) and not isinstance(v, bool) and _finite(v):
            rewards[i] = float(v)
        else:
            raise RewardFunctionError(f"reward function {f.name} returned {v!r} ({type(v).__name__}) for completion "
                                      f"{i}; a reward is a finite number (at most 1e30 in size) or None")
    return rewards
