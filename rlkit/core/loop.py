"""The run loop both trainers use: seeding, the run directory (new or resumed), logging,
learning-rate annealing, checkpoint cadence and the result file.

A trainer provides :class:`Iterating`: one update at a time (``iterate``), its checkpoint
(``save``) and what follows a checkpoint. Everything around it is here, once.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, NamedTuple, Protocol

import torch
from tqdm import tqdm

from rlkit.core.optim import Optimizer
from rlkit.io.checkpoint import new_run_dir, run_dir_of
from rlkit.io.logger import Logger


class Iteration(NamedTuple):
    """What one update reports to the loop."""

    stats: dict[str, float]
    """Scalars to log (``charts/``, ``losses/``, a variant's group)."""
    step: int
    """The x-axis value to log them at (env steps, or iterations)."""
    units: float
    """Environment steps this update took (for ``charts/steps_per_second`` and the progress bar)."""
    postfix: str | None = None
    """Shown beside the progress bar (e.g. the recent return)."""


class Scheduled(Protocol):
    def schedule(self, fraction: float) -> None:
        """Before every update: the inner learning rate is ``fraction`` of its initial value."""


class Iterating(Protocol):
    hooks: list[Scheduled]
    """Told the learning rate's annealing fraction before every update (e.g. Outer-PPO's sigma / mu)."""
    updates_done: int
    seconds: float
    """Seconds spent in updates so far (across resumes)."""

    def iterate(self) -> Iteration: ...

    def after_update(self, stats: dict[str, float], logger: Logger) -> None: ...

    def save(self) -> Path: ...

    def after_checkpoint(self) -> None: ...


@dataclass(frozen=True)
class Schedule:
    num_updates: int
    learning_rate: float
    anneal_lr: bool
    checkpoint_every: int
    """Updates between checkpoints (0: none); one is also written after the last update."""
    progress_total: float | None = None
    """Environment steps in the whole run for a progress bar on a terminal (None: no bar)."""

    def lr(self, updates_done: int) -> float:
        """Linear annealing to 0 over the run (or the constant rate)."""
        if not self.anneal_lr:
            return self.learning_rate
        return self.learning_rate * (1.0 - updates_done / self.num_updates)

    def checkpoint_due(self, updates_done: int) -> bool:
        return bool(self.checkpoint_every) and (updates_done % self.checkpoint_every == 0
                                                or updates_done == self.num_updates)


EPISODE_RESEED_STRIDE = 7919
"""After a checkpoint the envs restart from ``seed + EPISODE_RESEED_STRIDE * updates_done`` (a prime,
so restarts never reuse the run's first seeds), so a resumed run continues as an uninterrupted one."""
EVAL_SEED_OFFSET = 10_000
"""Evaluation episodes use ``seed + EVAL_SEED_OFFSET``: other episodes than training's, the same every time."""
PROMPT_STREAM_STRIDE = 100_003
"""RLHF sub-env i's prompt stream is seeded ``seed * PROMPT_STREAM_STRIDE + i`` (a prime above any env count)."""


def seed_and_threads(seed: int, threads: int) -> None:
    """Torch's global seed and intra-op thread count for this run."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)


def open_run_dir(logdir: str, run_name: str | None, default_name: str, resume: str | None) -> Path:
    """The resumed run's directory, or a new one made exclusively: ``logdir/run_name`` (refused
    if it exists) or ``logdir/default_name`` (numbered on a clash, e.g. runs started together)."""
    if resume:
        return run_dir_of(resume)
    return new_run_dir(logdir, run_name or default_name, numbered=run_name is None)


def timestamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def open_logger(run_dir: Path, resumed_at: int | None, config: Mapping[str, Any], variant: str,
                metric_tags: list[str], lead: tuple[str, ...] = ()) -> Logger:
    """The run's TensorBoard logger. A fresh run also writes its hparams (the variant's name, then
    the ``lead`` fields, then the rest, so runs of a sweep compare by what differs) and
    ``config.json``; a resumed one purges the events a killed run wrote after ``resumed_at``."""
    logger = Logger(str(run_dir), purge_step=resumed_at + 1 if resumed_at is not None else None)
    if resumed_at is None:
        first = {k: config[k] for k in lead if k in config}
        logger.hparams({"variant": variant, **first, **config}, metric_tags)
        (run_dir / "config.json").write_text(json.dumps(dict(config), indent=1))
    return logger


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped a run after the update in flight; a checkpoint was written."""

    def __init__(self, signum: int, run_dir: Path, checkpoint: Path) -> None:
        super().__init__(f"{signal.Signals(signum).name}: checkpoint {checkpoint.name} in {run_dir}")
        self.signum, self.run_dir, self.checkpoint = signum, run_dir, checkpoint


class _StopRequest:
    signum: int | None = None


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[_StopRequest]:
    """The first SIGINT or SIGTERM asks the loop to stop after the update in flight (and write a
    checkpoint); a second one stops at once. Only the main thread can own signal handlers."""
    request = _StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handler(signum: int, frame: object) -> None:
        if request.signum is not None:
            raise KeyboardInterrupt
        request.signum = signum

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield request
    finally:
        for s, previous in old.items():
            signal.signal(s, previous)


def run_updates(trainer: Iterating, optimizer: Optimizer, logger: Logger, schedule: Schedule,
                progress: bool = False, initial_units: float = 0) -> None:
    """Update until ``schedule.num_updates``: set the learning rate, time and log each update,
    checkpoint on the cadence (the log is flushed first, so everything up to a checkpoint is on
    disk before the checkpoint exists). SIGINT/SIGTERM stop the run after the update in flight
    with a checkpoint (:class:`Interrupted`); the continuation from it is a valid run, though not
    bit-identical to an uninterrupted one (the checkpoint starts new episodes)."""
    bar = tqdm(total=schedule.progress_total, initial=initial_units, unit="step", dynamic_ncols=True,
               disable=not (progress and schedule.progress_total and sys.stderr.isatty()))
    with _stop_on_signals() as stop:
        try:
            _loop(trainer, optimizer, logger, schedule, bar, stop)
        finally:
            bar.close()


def _loop(trainer: Iterating, optimizer: Optimizer, logger: Logger, schedule: Schedule, bar: tqdm,
          stop: _StopRequest) -> None:
    while trainer.updates_done < schedule.num_updates:
        start = time.perf_counter()
        lr = schedule.lr(trainer.updates_done)
        optimizer.param_groups[0]["lr"] = lr
        for hook in trainer.hooks:
            hook.schedule(lr / schedule.learning_rate)
        stats, step, units, postfix = trainer.iterate()
        seconds = time.perf_counter() - start
        trainer.seconds += seconds
        stats["charts/learning_rate"] = lr
        stats["charts/steps_per_second"] = units / seconds
        logger.scalars(stats, step)
        trainer.after_update(stats, logger)
        bar.update(units)
        if postfix:
            bar.set_postfix_str(postfix, refresh=False)
        due = schedule.checkpoint_due(trainer.updates_done)
        if due or stop.signum is not None:
            logger.flush()
            checkpoint = trainer.save()
            if stop.signum is not None:
                raise Interrupted(stop.signum, checkpoint.parents[1], checkpoint)
            if trainer.updates_done < schedule.num_updates:
                trainer.after_checkpoint()


def write_result(run_dir: Path, result: Mapping[str, Any]) -> None:
    """``result.json`` (what the CLI prints as one line)."""
    (run_dir / "result.json").write_text(json.dumps(dict(result), indent=1))
