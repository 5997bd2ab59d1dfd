"""Resumable checkpoints of Gymnasium runs, in the core's format (:mod:`rlkit.io.checkpoint`).

What a checkpoint holds: the model's weights, the learner's state (Adam's moments, every random
stream, the variants' state: Outer-PPO's optimizer, HP3O's stored trajectories), the progress
(update, env steps, training seconds), observation and reward normalization, the recent returns
and the evaluation history. Environments restart at each scheduled checkpoint from a seed derived
from the update (``EPISODE_RESEED_STRIDE``), so a run resumed from update k continues exactly as
the uninterrupted run. A checkpoint a signal forced between two scheduled ones holds envs
mid-episode, which no checkpoint can store: a resume starts from the newest scheduled one instead
and recomputes the updates since, to the same numbers.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from torch import nn

from rlkit.core.learner import Learner, Progress
from rlkit.core.normalization import ObsNormalizer, RewardScaler
from rlkit.errors import CheckpointError, ConfigError
from rlkit.gym.config import TrainConfig
from rlkit.gym.episodes import Episodes
from rlkit.io.checkpoint import (EXACT, POPULATION_MARKER, checkpoint_candidates, prefixed, restore_weights,
                                 restoring, run_dir_of, save_checkpoint, unprefixed)
from rlkit.io.files import read_json
from rlkit.io.schema import result_problem
from rlkit.variants.migrate import StoredRun, config_of, read_run

RESUMABLE = ("total_steps", "checkpoint_every", "eval_every", "eval_episodes", "eval_max_steps", "progress",
             "torch_threads", "device", "async_envs")
"""Fields a resumed run may change (e.g. to extend it); every other field is the run's own."""
REQUIRED_STATE = ("obs_norm", "rew_scaler", "recent_returns")
"""What a Gymnasium checkpoint holds beside every checkpoint's keys (:data:`rlkit.variants.migrate.REQUIRED_STATE`)."""


@dataclass
class Evaluations:
    """Every evaluation of a run so far."""

    history: list[tuple[int, float, float]] = field(default_factory=list)
    """``(env steps, return mean, return std)`` of each."""
    seconds: list[float] = field(default_factory=list)
    """Training seconds before each."""

    def adopt_final(self, result: dict, env_steps: int) -> None:
        """Add the final evaluation at ``env_steps`` that a finished run's ``result`` (its checked
        ``result.json``) holds beyond this history (its last checkpoint comes before that evaluation),
        so that an extension keeps every evaluation the run has made."""
        history, seconds = result["eval_history"], result.get("eval_seconds")
        steps = [e[0] for e in self.history]
        if not history or history[-1][0] != env_steps or steps != [e[0] for e in history[:-1]]:
            return
        self.history.append(tuple(history[-1]))  # type: ignore[arg-type]
        self.seconds.append(float("nan") if seconds is None or seconds[-1] is None else seconds[-1])


class GymParts(NamedTuple):
    """What a Gymnasium checkpoint holds beside the learner and the progress."""

    model: nn.Module
    obs_norm: ObsNormalizer
    rew_scaler: RewardScaler
    episodes: Episodes
    evaluations: Evaluations


def resume_config(path: str, changes: dict[str, object]) -> tuple[TrainConfig, StoredRun]:
    """The run's own config with ``changes`` applied, and what it stored (no checkpoint when the
    run never completed one: it then starts again from update 0, in place)."""
    stored = read_run(path, "gym", changes, RESUMABLE, REQUIRED_STATE, TrainConfig().to_dict())
    cfg = config_of(TrainConfig, stored, changes, path)
    if stored.state is not None and stored.state["env_steps"] != stored.state["update"] * cfg.batch_size:
        raise CheckpointError(f"checkpoint at {path!r} holds update={stored.state['update']} and env_steps="
                              f"{stored.state['env_steps']} in state.json; every update takes {cfg.batch_size} steps")
    if stored.state is not None and cfg.total_steps < int(stored.state["env_steps"]):
        raise ConfigError(f"total_steps={cfg.total_steps} is below the {stored.state['env_steps']} steps the run "
                          "has done")
    return cfg, stored


def finished_result(run_dir: Path, env_steps: int, env: str, seed: int) -> dict | None:
    """The result the finished run of ``env`` and ``seed`` wrote at ``env_steps`` (None if it has
    none, e.g. it was killed in its final evaluation, or only an earlier one: an extension stopped
    after its last update; or one of another shape: damaged, it is evaluated again)."""
    result = read_json(run_dir / "result.json")
    if result is None or result_problem(result, env, seed):
        return None
    return result if result["total_steps"] == env_steps else None


MEMBER = "population_member"
"""``state.json`` key, True in every checkpoint a population writes: its run resumes as a member
(with its population's numbers) even where its ``population.json`` is lost."""


def trained_in_population(path: str | Path) -> bool:
    """Whether the run at ``path`` (a run directory or a checkpoint in it) was trained as a member
    of a population: its ``population.json``, or else its newest readable checkpoint, says so."""
    run_dir = run_dir_of(path)
    if (run_dir / POPULATION_MARKER).is_file():
        return True
    for ckpt in checkpoint_candidates(run_dir):
        state = read_json(ckpt / "state.json")
        if state is not None:
            return state.get(MEMBER) is True
    return False


def save_gym(run_dir: Path, cfg: TrainConfig, learner: Learner, progress: Progress, parts: GymParts,
             scheduled: bool = True, member: bool = False) -> Path:
    """A checkpoint of the run. One off the cadence (``scheduled`` False: a signal stopped the run)
    is marked (:data:`~rlkit.io.checkpoint.EXACT`) and prunes nothing, so the newest scheduled one,
    from which a resume continues as the uninterrupted run, stays. A population ``member``'s is
    marked :data:`MEMBER`."""
    tensors, learner_state = learner.checkpoint()
    tensors.update(prefixed("model", parts.model.state_dict()))
    state = {"config": cfg.to_dict(), "trainer": "gym", **progress.to_json(), **learner_state,
             "obs_norm": parts.obs_norm.state_dict(), "rew_scaler": parts.rew_scaler.state_dict(),
             "recent_returns": list(parts.episodes.recent), "eval_history": parts.evaluations.history,
             "eval_seconds": parts.evaluations.seconds, EXACT: scheduled, **({MEMBER: True} if member else {})}
    return save_checkpoint(run_dir, f"update-{progress.updates_done:07d}", tensors, state, keep=2 if scheduled else 0)


def _returns(values: object) -> list[float]:
    """The stored recent returns, checked: a list of finite numbers (anything else is a ``ValueError``)."""
    if not isinstance(values, list) or not all(type(v) in (int, float) and abs(v) <= sys.float_info.max
                                               and math.isfinite(v) for v in values):
        raise ValueError("recent_returns is not a list of finite numbers")
    return [float(v) for v in values]


def _history(values: object) -> list[tuple[int, float, float]]:
    """The stored evaluation history, checked: ``[env steps, mean, std]`` triples."""
    def number(x: object) -> bool:
        return x is None or type(x) in (int, float)
    if not isinstance(values, list) or not all(
            isinstance(e, list) and len(e) == 3 and type(e[0]) is int and number(e[1]) and number(e[2]) for e in values):
        raise ValueError("eval_history is not a list of [env steps, return mean, return std]")
    return [tuple(e) for e in values]  # type: ignore[misc]


def _seconds(values: object, n: int) -> list[float]:
    """The stored training seconds before each evaluation, checked: ``n`` numbers."""
    if not isinstance(values, list) or len(values) != n or not all(type(v) in (int, float) for v in values):
        raise ValueError(f"eval_seconds is not a list of {n} numbers")
    return list(values)


def load_gym(run_dir: Path, stored: StoredRun, learner: Learner, parts: GymParts) -> Progress:
    """Restore ``learner`` and ``parts`` from ``stored`` and return the run's progress (a
    checkpoint that does not fit this run is a one-line :class:`CheckpointError`)."""
    tensors, state = stored.tensors, stored.state
    if tensors is None or state is None:
        return Progress()
    with restoring(run_dir):
        restore_weights(parts.model, unprefixed("model", tensors))  # in place: the flat views stay intact
        learner.restore(tensors, state)
        parts.obs_norm.load_state_dict(state["obs_norm"])
        parts.rew_scaler.load_state_dict(state["rew_scaler"])
        parts.episodes.recent.extend(_returns(state["recent_returns"]))
        history = _history(state.get("eval_history", []))
        parts.evaluations.history[:] = history
        parts.evaluations.seconds[:] = _seconds(state.get("eval_seconds", [float("nan")] * len(history)), len(history))
        return Progress.from_json(state)
