"""The one reader of a run to resume (:func:`read_run`), and every rule that reads a stored
record in the form the trainers use.

Configs are flat JSON records (:func:`rlkit.core.composed.composed_to_dict`): a field a record
lacks reads as its default, so a rule is needed only where a record without the field was
trained otherwise than that default (:func:`migrate_config`: ``hp3o_sampling``,
``outer_grad_from``), and a run continues as it started. Checkpoints are read in two forms of
keys: the shared one (``trainer``, ``update``, ``env_steps``, ``seconds``, ``variants``) and a
per-trainer one without ``trainer`` (Gymnasium: ``global_step``, ``train_seconds``,
``rng.torch_generator``, HP3O's trajectories under ``hp3o_buffer``; RLHF: ``iteration``,
``tokens``, ``checkpoint_every`` in iterations, HP3O's under ``hp3o``), which
:func:`migrate_checkpoint` reads as the shared one.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from rlkit.core.composed import flat_field_names, refused_fields
from rlkit.errors import CheckpointError, ConfigError
from rlkit.io.checkpoint import (checkpoint_candidates, find_resume_point, load_checkpoint, newest_config,
                                 refuse_changes, require_state, run_dir_of)
from rlkit.io.files import read_json
from rlkit.variants.containers import variant_groups

if TYPE_CHECKING:
    from pathlib import Path

    import torch

log = logging.getLogger("rlkit")
C = TypeVar("C")
COMMANDS = {"gym": "rlkit train", "rlhf": "rlkit rlhf"}
"""The command that continues a run of each trainer."""
REQUIRED_STATE = ("config", "trainer", "update", "env_steps", "seconds", "rng_numpy")
"""What every checkpoint's ``state.json`` holds (after :func:`migrate_checkpoint`)."""


class StoredRun(NamedTuple):
    """A run to resume, in the form the trainers use."""

    record: dict[str, Any]
    """Its flat config (the config's fields and units)."""
    tensors: dict[str, torch.Tensor] | None
    """Its newest valid checkpoint's tensors (None: it never completed one)."""
    state: dict[str, Any] | None
    """That checkpoint's JSON state, in the shared keys."""
    checkpoint: Path | None = None
    """That checkpoint's folder (None: it never completed one)."""


def read_run(path: str, trainer: str, changes: dict[str, Any], resumable: tuple[str, ...],
             required: tuple[str, ...] = (), defaults: dict[str, Any] | None = None) -> StoredRun:
    """The run at ``path`` to continue with ``trainer``: ``changes`` outside ``resumable`` are
    refused, a run of the other trainer is a one-line error naming the command that continues it,
    and a run that never completed a checkpoint starts again from its ``config.json`` (state None).
    ``defaults``: the trainer config's flat defaults (for fields a record leaves out).
    A state that does not hold what it should is a one-line :class:`CheckpointError`."""
    if trainer == "gym":
        newest = newest_config(path)
        found = find_resume_point(path, ("config",), exact=True)
    else:
        newest, found = None, None if _never_checkpointed(path) else load_checkpoint(path, ("config",))
    if found is None:  # a run that starts again from its config.json
        record = _latest_settings(migrate_config(_fresh_record(path, trainer), trainer), newest, resumable)
        _refuse_changes(changes, record, resumable, defaults)
        if not checkpoint_candidates(path):
            log.warning("no complete checkpoint in %s: the run starts again from its beginning", run_dir_of(path))
        return StoredRun(record, None, None)
    try:
        tensors, state = migrate_checkpoint(*found[:2], defaults=defaults or {})
    except (ValueError, TypeError, OverflowError, AttributeError) as exc:
        raise CheckpointError(f"checkpoint at {path!r} has a malformed state.json: "
                              f"{type(exc).__name__}: {exc}") from None
    other = state.get("trainer")
    if not isinstance(other, str) or other not in COMMANDS:
        raise CheckpointError(f"checkpoint at {path!r} names an unknown trainer {other!r} in state.json")
    if other != trainer:
        raise ConfigError(f"{path!r} is {'a Gymnasium' if other == 'gym' else 'an RLHF'} run; continue it with: "
                          f"{COMMANDS[other]} --resume {path}")
    require_state(path, state, REQUIRED_STATE + required)
    _check_state(path, state)
    record = migrate_config(state["config"], trainer)
    if trainer == "gym":
        record = _latest_settings(record, newest, resumable)
    _refuse_changes(changes, record, resumable, defaults)
    return StoredRun(record, tensors, state, found[2])


def _latest_settings(record: dict[str, Any], newest: dict[str, Any] | None, resumable: tuple[str, ...]
                     ) -> dict[str, Any]:
    """``record`` with the ``resumable`` settings of the newest checkpoint's config: a resume that
    falls back from a checkpoint written at an interrupt to the scheduled one before it keeps what
    the run last ran with (an extended ``total_steps``), not what that older checkpoint recorded."""
    if newest is None:
        return record
    fits = {k: record.get(k) is None or type(newest[k]) is type(record[k]) for k in resumable if k in newest}
    for k in (k for k, ok in fits.items() if not ok):
        log.warning("the newest checkpoint holds %s=%r (expected type %s); resuming with %r", k, newest[k],
                    type(record[k]).__name__, record[k])
    return {**record, **{k: newest[k] for k, ok in fits.items() if ok}}


def _refuse_changes(changes: dict[str, Any], record: dict[str, Any], resumable: tuple[str, ...],
                    defaults: dict[str, Any] | None) -> None:
    """:func:`refuse_changes` for the values that differ from the run's own (``--seed 3`` on a run
    with seed 3 changes nothing)."""
    def same(name: str) -> bool:
        try:
            return json.dumps(changes[name]) == json.dumps(record.get(name, (defaults or {}).get(name)))
        except (TypeError, ValueError):
            return False
    refuse_changes({k: v for k, v in changes.items() if not same(k)}, resumable)


def _never_checkpointed(path: str) -> bool:
    """An RLHF run stopped before its first checkpoint: its ``config.json`` and no checkpoint, and
    nothing of a finished run (a finished run without checkpoints is refused, never trained again)."""
    run_dir = run_dir_of(path)
    finished = any((run_dir / name).exists() for name in ("policy.safetensors", "result.json"))
    return not checkpoint_candidates(path) and (run_dir / "config.json").is_file() and not finished


def _fresh_record(path: str, trainer: str) -> dict[str, Any]:
    """The ``config.json`` of a run of ``trainer`` that never completed a checkpoint."""
    record = read_json(run_dir_of(path) / "config.json")
    if not isinstance(record, dict):
        raise CheckpointError(f"cannot resume {path!r}: no checkpoint, and its config.json is missing or damaged")
    other = "rlhf" if "iterations" in record and "total_steps" not in record else "gym"
    if other != trainer:
        raise ConfigError(f"{path!r} is {'a Gymnasium' if other == 'gym' else 'an RLHF'} run; continue it with: "
                          f"{COMMANDS[other]} --resume {path}")
    return record


def _check_state(path: str, state: dict[str, Any]) -> None:
    """The keys every checkpoint holds have the types they should (a damaged or edited file is one line)."""
    counters = [k for k in ("update", "env_steps") if type(state[k]) is not int or state[k] < 0]
    seconds = state["seconds"]
    if counters or not (type(seconds) in (int, float) and 0 <= seconds < float("inf")):
        bad = (counters or ["seconds"])[0]
        raise CheckpointError(f"checkpoint at {path!r} holds {bad}={state[bad]!r} in state.json; expected a "
                              "non-negative " + ("integer" if counters else "number"))
    for key in ("config", "variants"):
        if not isinstance(state.get(key, {}), dict):
            raise CheckpointError(f"checkpoint at {path!r} holds a {key} that is not a mapping in state.json")


def config_of(cls: type[C], stored: StoredRun, changes: dict[str, Any], path: str) -> C:
    """The stored run's config as ``cls`` with ``changes`` and ``resume=path``. A record with
    options no registered variant has (a plug-in's, its module not loaded) says so in one line."""
    require_known_options(cls, stored.record, path, "resume it")
    return cls.from_dict({**stored.record, **changes, "resume": path})  # type: ignore[attr-defined]


def require_known_options(cls: type, record: dict[str, Any], path: str, to: str) -> None:
    """A one-line :class:`ConfigError` when the run at ``path`` was run with options (``record``'s
    fields) that no loaded variant of config ``cls`` has: its plug-in's module is to be named in
    ``RLKIT_VARIANTS`` ``to`` (what the user does with the run)."""
    unknown = sorted(set(record) - set(flat_field_names(cls)))
    if unknown:
        raise ConfigError(f"{path!r} was run with option(s) {', '.join(unknown)} that no loaded variant has; "
                          f"name the variant's module in RLKIT_VARIANTS to {to}")


def migrate_checkpoint(tensors: dict[str, torch.Tensor], state: dict[str, Any], defaults: dict[str, Any] | None = None
                       ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """A checkpoint's tensors and state in the shared keys (one in that form is returned as it is);
    ``defaults`` are the trainer config's flat defaults, for fields a record leaves out."""
    if not isinstance(state, dict) or "trainer" in state:
        return tensors, state
    state, tensors = dict(state), dict(tensors)
    if "iteration" in state:  # an RLHF checkpoint
        state.update(trainer="rlhf", update=state.pop("iteration"), env_steps=round(float(state.pop("tokens", 0))))
        state["config"] = _checkpoints_in_steps(state.get("config"), defaults or {})
    else:
        state.update(trainer="gym", env_steps=state.pop("global_step", None), seconds=state.pop("train_seconds", None))
        if "rng.torch_generator" in tensors:
            tensors["rng.generator"] = tensors.pop("rng.torch_generator")
    state["variants"] = variant_meta(state)
    return tensors, {k: v for k, v in state.items() if v is not None}


def _checkpoints_in_steps(record: Any, defaults: dict[str, Any]) -> Any:
    """A per-trainer RLHF record counts ``checkpoint_every`` in iterations; the shared form counts
    environment steps (tokens), as the Gymnasium trainer does, at most ``num_envs x max_new_tokens``
    per iteration."""
    if not isinstance(record, dict) or "checkpoint_every" not in record:
        return record  # the default (no checkpoints) means the same in both units
    sizes = [record.get(k, defaults.get(k)) for k in ("checkpoint_every", "num_envs", "max_new_tokens")]
    if not all(type(n) is int for n in sizes):
        return record  # a damaged record: the config's own checks refuse it
    every, num_envs, max_new_tokens = sizes
    return {**record, "checkpoint_every": every * num_envs * max_new_tokens}

SAMPLING_WHEN_UNRECORDED = "topup"
"""HP3O's per-epoch sampling on Gymnasium episodes of a record without ``hp3o_sampling`` (the
option's default is the authors' form); the RLHF trainer does not sample within responses."""


OUTER_GRAD_FROM_WHEN_UNRECORDED = "theta"
"""Where Outer-PPO's biased initialization measures the outer gradient for a record with a bias
and without ``outer_grad_from`` (the option's default is the biased starting point)."""


def migrate_config(record: dict[str, Any], trainer: str) -> dict[str, Any]:
    """A stored flat config of a ``gym`` or ``rlhf`` run as the config's fields read it (the record
    itself is left unchanged): without the options the trainer does not honour where they hold
    their defaults (a record written with every variant's options)."""
    refused = refused_fields(variant_groups(trainer))
    out = {k: v for k, v in record.items() if k not in refused or v != refused[k].default}
    if trainer == "gym" and out.get("hp3o") and "hp3o_sampling" not in out:
        out["hp3o_sampling"] = SAMPLING_WHEN_UNRECORDED
    if out.get("outer_bias") and "outer_grad_from" not in out:
        out["outer_grad_from"] = OUTER_GRAD_FROM_WHEN_UNRECORDED
    elif not out.get("outer_bias"):
        out.pop("outer_grad_from", None)  # means nothing without a bias (a record may hold a default)
    return out


def variant_meta(state: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint's per-variant JSON (``variants``; in the per-trainer form, HP3O's alone:
    ``hp3o_buffer`` for a Gymnasium run, ``hp3o`` for an RLHF run)."""
    if "variants" in state:
        return state["variants"]
    hp3o = state.get("hp3o_buffer", state.get("hp3o"))
    return {"hp3o": hp3o} if hp3o is not None else {}
