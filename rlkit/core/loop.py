"""The update loop both trainers use: the log (opened fresh or resumed), learning-rate annealing,
the updates to the end, the checkpoint cadence and a signal's stop after the update in flight.
The run around it (its directory and lock, seeds and threads, the result file, signal handling)
is :mod:`rlkit.io`'s (:mod:`~rlkit.io.run`, :mod:`~rlkit.io.threads`, :mod:`~rlkit.io.signals`).

A trainer provides :class:`Steps`: one update at a time (``iterate``), its checkpoint (``save``)
and what follows an update, a checkpoint and the run; it composes a :class:`Learner` and a
:class:`Progress`. Everything around them (:func:`train_steps`) is here, once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Protocol

from tqdm import tqdm

from rlkit.core.config import checkpoint_cadence
from rlkit.core.learner import Learner, Progress
from rlkit.io.checkpoint import checkpoint_candidates
from rlkit.io.files import write_json
from rlkit.io.logger import Logger
from rlkit.io.progress import progress_bar
from rlkit.io.signals import EnvStuck, Interrupted, SignalStop, stop_on_signals


class Iteration(NamedTuple):
    """What one update reports to the loop."""

    stats: dict[str, float]
    """Scalars to log (``charts/``, ``losses/``, a variant's group)."""
    units: int
    """Environment steps this update took (added to the progress; ``charts/steps_per_second``, the bar)."""
    postfix: str | None = None
    """Shown beside the progress bar (e.g. the recent return)."""


class Steps(Protocol):
    """What a trainer gives the skeleton (:func:`train_steps`): its own update and what follows it."""

    def iterate(self) -> Iteration:
        """One update: collect, select batches, the learner's passes."""

    def after_update(self, stats: dict[str, float], logger: Logger) -> None:
        """After the update is logged (e.g. a periodic evaluation)."""

    def save(self, scheduled: bool) -> Path:
        """Write a checkpoint; returns its folder. ``scheduled``: one of the cadence's (else a
        signal stopped the run between two)."""

    def after_checkpoint(self) -> None:
        """After a checkpoint, unless the run is over (e.g. start new episodes)."""

    def finish(self, logger: Logger) -> None:
        """After the last update (e.g. close the envs, the final evaluation)."""

    def abort(self, error: BaseException) -> None:
        """The run stopped with ``error`` (an interrupt after its checkpoint, or a failure)."""


@dataclass(frozen=True)
class Schedule:
    num_updates: int
    learning_rate: float
    anneal_lr: bool
    checkpoint_every: int
    """Updates between checkpoints (0: none); one is also written after the last update."""
    log_by_updates: bool = False
    """The x-axis of the logged scalars and the progress bar's unit: updates (True) or environment steps (False)."""
    progress_total: float | None = None
    """Environment steps in the whole run for a progress bar on a terminal (None: no bar)."""

    def lr(self, updates_done: int) -> float:
        """Linear annealing to 0 over the run (or the constant rate)."""
        if not self.anneal_lr:
            return self.learning_rate
        return self.learning_rate * (1.0 - updates_done / self.num_updates)

    checkpoint_cadence = staticmethod(checkpoint_cadence)

    def checkpoint_due(self, updates_done: int) -> bool:
        return bool(self.checkpoint_every) and (updates_done % self.checkpoint_every == 0
                                                or updates_done == self.num_updates)


EPISODE_RESEED_STRIDE = 7919
"""After a checkpoint the envs restart from ``seed + EPISODE_RESEED_STRIDE * updates_done`` (a prime,
so restarts never reuse the run's first seeds), so a resumed run continues as an uninterrupted one."""
EVAL_SEED_OFFSET = 10_000
"""Evaluation episodes use ``seed + EVAL_SEED_OFFSET``: other episodes than training's, the same every time."""


def open_logger(run_dir: Path, resumed_at: int | None, config: Mapping[str, Any], variant: str,
                hparams: tuple[str, ...]) -> Logger:
    """The run's TensorBoard logger. A fresh run writes, before anything else, ``config.json`` (a
    run killed before its first checkpoint starts again from it), then its whole config as a text
    table and, as its hparams, the variant's name and the ``hparams`` fields of ``config`` (only
    these: TensorBoard's HPARAMS tab then shows what tells runs apart); a resumed one purges the
    events a killed run wrote after ``resumed_at`` and writes neither again."""
    if resumed_at is None:  # first: a run killed from here on starts again from its config.json
        write_json(run_dir / "config.json", dict(config))
    logger = Logger(str(run_dir), purge_step=resumed_at + 1 if resumed_at is not None else None)
    if resumed_at is None:
        logger.config_table(config)
        logger.hparams({"variant": variant, **{k: config[k] for k in hparams if k in config}})
    return logger


@dataclass(frozen=True)
class RunSpec:
    """How :func:`train_steps` runs a trainer: where it logs, what it logs first, its schedule."""

    run_dir: Path
    config: Mapping[str, Any]
    """The flat config (``config.json`` and the text table of a fresh run)."""
    variant: str
    hparams: tuple[str, ...]
    """The config fields its hparams show after the variant (see :func:`open_logger`)."""
    schedule: Schedule
    resumed: bool
    progress_bar: bool = False


def train_steps(steps: Steps, learner: Learner, progress: Progress, spec: RunSpec) -> None:
    """The run both trainers share: open the log (purging what a killed run wrote after the
    resume point), run the updates to the end, ``finish`` (or ``abort`` on any error), close the log.
    A signal during ``finish`` (the final evaluation) stops it at once: the run's last checkpoint
    stands, and resuming the run evaluates it again."""
    axis = progress.updates_done if spec.schedule.log_by_updates else progress.env_steps
    logger = open_logger(spec.run_dir, axis if spec.resumed else None, spec.config, spec.variant, spec.hparams)
    with stop_on_signals() as stop:
        try:
            run_updates(steps, learner, progress, logger, spec.schedule, spec.progress_bar)
            if stop.signum is not None:  # arrived after the last checkpoint: stop before the evaluation
                raise SignalStop(stop.signum)
            stop.at_once = True
            try:
                steps.finish(logger)
            finally:
                stop.at_once = False
        except SignalStop as exc:
            steps.abort(exc)
            newest = next(iter(checkpoint_candidates(spec.run_dir)), None)
            reason = exc.message if isinstance(exc, EnvStuck) else None  # one line says why and what is left
            raise Interrupted(exc.signum, spec.run_dir, newest, written=False, reason=reason) from None
        except BaseException as exc:
            steps.abort(exc)
            raise
        finally:
            logger.close()


def run_updates(steps: Steps, learner: Learner, progress: Progress, logger: Logger, schedule: Schedule,
                progress_bar_on: bool = False) -> None:
    """Update until ``schedule.num_updates``: set the learning rate, time and log each update,
    advance ``progress``, checkpoint on the cadence (the log is flushed first, so everything up to
    a checkpoint is on disk before the checkpoint exists). SIGINT/SIGTERM stop the run after the
    update in flight with a checkpoint (:class:`Interrupted`); ``steps.save`` is told whether that
    checkpoint is one of the cadence's (a trainer whose runs continue differently from a checkpoint
    off the cadence marks it so, and resumes from the newest one on it)."""
    if schedule.log_by_updates:  # e.g. RLHF: one bar step per iteration
        bar = progress_bar(schedule.num_updates, "it", progress_bar_on, initial=progress.updates_done)
    else:
        bar = progress_bar(schedule.progress_total, "step", progress_bar_on and bool(schedule.progress_total),
                           initial=progress.env_steps)
    resumed_at = progress.updates_done
    with stop_on_signals() as stop:
        try:
            while progress.updates_done < schedule.num_updates:
                if stop.signum is None:  # a signal during start-up stops before the first update
                    _update(steps, learner, progress, logger, schedule, bar)
                elif progress.updates_done == resumed_at > 0:  # the checkpoint resumed from already holds it all
                    raise SignalStop(stop.signum)
                scheduled = schedule.checkpoint_due(progress.updates_done)
                if scheduled or stop.signum is not None:
                    logger.flush()
                    checkpoint = steps.save(scheduled)
                    if stop.signum is not None:
                        stop.over = True  # the checkpoint is written: a second signal cannot change the outcome
                        raise Interrupted(stop.signum, checkpoint.parents[1], checkpoint)
                    if progress.updates_done < schedule.num_updates:
                        steps.after_checkpoint()
        finally:
            bar.close()


def set_learning_rate(learner: Learner, schedule: Schedule, updates_done: int) -> float:
    """Before an update: the schedule's learning rate into the optimizer, its annealing fraction
    to the learner's hooks; returns the rate."""
    lr = schedule.lr(updates_done)
    learner.optimizer.param_groups[0]["lr"] = lr
    learner.schedule(lr / schedule.learning_rate)
    return lr


def _update(steps: Steps, learner: Learner, progress: Progress, logger: Logger, schedule: Schedule,
            bar: tqdm) -> None:
    start = time.perf_counter()
    lr = set_learning_rate(learner, schedule, progress.updates_done)
    stats, units, postfix = steps.iterate()
    seconds = time.perf_counter() - start
    progress.updates_done += 1
    progress.env_steps += units
    progress.seconds += seconds
    stats["charts/learning_rate"] = lr
    stats["charts/steps_per_second"] = units / seconds
    logger.scalars(stats, progress.updates_done if schedule.log_by_updates else progress.env_steps)
    steps.after_update(stats, logger)
    bar.update(1 if schedule.log_by_updates else units)
    if postfix:
        bar.set_postfix_str(postfix, refresh=False)
