"""The population's engine: independent PPO runs trained in lockstep as one batched network.

Every member is a whole single run (:class:`PPOTrainer`): its own seed, envs, weights, Adam state,
normalization statistics, random streams, run directory, TensorBoard events, checkpoints and
``result.json``, so ``rlkit eval``, ``rlkit report`` and ``--resume`` see no difference. The
population steps its members in lockstep: one batched matmul per layer acts for all of them
(:class:`StackedActor`), each member's envs step as in its single run, and the update runs every
member's minibatches through one batched network (:func:`stacked_epochs`). A member that fails
(an env error, a non-finite loss) is recorded as failed, with its one-line error, and the others
go on. PPO and the variants that act around the inner epochs (Outer-PPO: each member its own outer
step and momentum) or bring their own objective (a KL penalty: each member its own coefficient)
update as one stacked network; a variant that chooses its own batches (HP3O:
each member its own trajectory buffer and hybrid batches of its own size) updates each member by
its single run's code on its own parameters, the rollout still batched. Vector observations (MLP
policies) only: an image or action masks are refused in one line.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch

from rlkit.core.buffer import Rollout
from rlkit.core.loop import Schedule, open_logger, set_learning_rate
from rlkit.core.objective import stack_objectives
from rlkit.core.update import explained_variance
from rlkit.errors import RlkitError, one_line
from rlkit.gym.population.eval import evaluate_together
from rlkit.gym.population.network import MemberBatch, StackedLoss, StackedParameters, direct_step, stacked_epochs
from rlkit.gym.population.rollout import StackedRollout
from rlkit.gym.result import TrainResult
from rlkit.gym.trainer import PPOTrainer
from rlkit.io.checkpoint import checkpoint_candidates
from rlkit.io.logger import Logger
from rlkit.io.progress import progress_bar
from rlkit.io.signals import Interrupted, SignalStop, stop_on_signals
from rlkit.io.threads import blas_threads

log = logging.getLogger("rlkit")


@dataclass
class MemberOutcome:
    """How one member of a population ended."""

    seed: int
    run_dir: str
    result: TrainResult | None = None
    """Its result, as a single run returns it (None if it failed)."""
    error: str | None = None
    """The one-line error it stopped with (None if it finished)."""


class PopulationInterrupted(Interrupted):
    """SIGINT or SIGTERM stopped a population: after the update in flight with every live member's
    checkpoint written (``written``), or at once, with their newest checkpoints standing."""

    def __init__(self, signum: int, run_dirs: list[Path], checkpoint: Path | None, written: bool = True,
                 failed: dict[str, str] | None = None) -> None:
        super().__init__(signum, run_dirs[0], checkpoint, written)
        self.run_dirs = run_dirs
        """The live members' run directories (what ``--resume DIR DIR ...`` continues)."""
        self.failed = failed or {}
        """Run directory -> one-line error of each member that failed before the stop."""


def _each(calls: list[Any]) -> list[Any]:
    """Call each of ``calls`` in order (a member's update hooks: Outer-PPO's outer step)."""
    return [call() for call in calls]


def _own_update(member: PPOTrainer, source: Any, stats: dict[str, float]) -> dict[str, float]:
    """The passes of a member whose batch source chose its own batches (HP3O), run by its single
    run's code on its own parameters; ``source`` None: nothing to learn from yet."""
    if source is not None:
        stats.update(member.learner.passes(source, member.optimize))
    return stats


class Population:
    """Members (single runs of one config but the seed, at the same update) trained in lockstep.
    ``rng_states``: each member's torch global random state as its single run would hold it (a
    member's checkpoint records it; nothing in training draws from it)."""

    def __init__(self, members: list[PPOTrainer], rng_states: list[torch.Tensor]) -> None:
        self.members = members
        for m in members:  # their checkpoints say they are members (a resume then keeps their numbers)
            m.population_member = True
        self.rng_states = rng_states
        self.failed: dict[int, str] = {}
        first = members[0]
        self.cfg = first.cfg
        # A variant that chooses each update's batches (HP3O, Liu et al. 2025) has every member
        # update by its single run's code on its own parameters; the others update as one stacked network.
        self.own_updates = any(v.replaces_batch for v in self.cfg.variants.enabled())
        self.stacked: StackedParameters | None = None
        self.loss: StackedLoss | None = None
        self.step = None
        if not self.own_updates:
            self.stacked = StackedParameters([m.learner.flat for m in members], first.model,
                                             fused=first.cfg.kernels != "plain")
            for m in members:  # a fused forward's weight views follow the parameters into their rows of theta
                m.kernels.prepare(m.model, m.learner.flat)
            objective = stack_objectives([m.learner.objective for m in members])
            self.loss = StackedLoss(first.head, first.cfg.ppo, fused=first.cfg.kernels != "plain", objective=objective)
            self.step = direct_step(self.stacked, self.loss)
        self.rollout = StackedRollout(members, self._fail, self.live)
        self.updates_done = first.progress.updates_done
        """Updates every live member has done (they start at the same one and advance together)."""

    def live(self) -> list[int]:
        return [k for k in range(len(self.members)) if k not in self.failed]

    def _fail(self, k: int, error: BaseException) -> None:
        """Member ``k`` failed with ``error``: its first failure is the one it keeps."""
        if k in self.failed:
            return
        self.failed[k] = one_line(error)
        log.warning("population member seed %s failed, the others go on: %s", self.members[k].cfg.seed,
                    self.failed[k])
        self.members[k].abort(error)

    def _guard(self, k: int, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` for member ``k``; an rlkit error fails that member alone (None returned)."""
        try:
            return fn(*args)
        except RlkitError as exc:
            self._fail(k, exc)
            return None

    def train(self) -> list[MemberOutcome]:
        """Run every member to the end (holding their run directories); returns their outcomes."""
        done = False
        with contextlib.ExitStack() as held:
            held.callback(lambda: self.rollout.close(abort=not done))  # the env worker, however this ends
            # One BLAS thread: the update's products are one member's small GEMM each (numpy's, in
            # rlkit.fast.stacked_mlp), where OpenBLAS's threads cost more than they share.
            held.enter_context(blas_threads(1))
            for m in self.members:
                held.enter_context(m.lock)
                m.prior = m.prior_result()
            specs = [m.run_spec() for m in self.members]
            loggers = [open_logger(s.run_dir, m.progress.env_steps if s.resumed else None, s.config, s.variant,
                                   s.hparams) for m, s in zip(self.members, specs)]
            try:
                self._run(loggers, specs[0].schedule)
                done = True
            finally:
                for logger in loggers:
                    logger.close()
            return [MemberOutcome(m.cfg.seed, str(m.run_dir), error=self.failed[k]) if k in self.failed
                    else MemberOutcome(m.cfg.seed, str(m.run_dir), result=m.final_result())
                    for k, m in enumerate(self.members)]

    def _run(self, loggers: list[Logger], schedule: Schedule) -> None:
        """The run loop (:func:`rlkit.core.loop.train_steps`) for all members at once. A signal
        during start-up stops before the first update, with a checkpoint (as a single run does)."""
        resumed_at = self.updates_done
        bar = progress_bar(len(self.members) * (schedule.progress_total or 0), "step", self.cfg.progress,
                           initial=sum(m.progress.env_steps for m in self.members))
        with stop_on_signals() as stop, contextlib.closing(bar):
            try:
                while self.live() and self.updates_done < schedule.num_updates:
                    if stop.signum is None:
                        bar.update(self._update(loggers, schedule))
                    elif self.updates_done == resumed_at > 0:  # the checkpoints resumed from hold it all
                        raise SignalStop(stop.signum)
                    scheduled = schedule.checkpoint_due(self.updates_done)
                    if scheduled or stop.signum is not None:
                        self._checkpoint(loggers, scheduled, stop.signum)
                if stop.signum is not None:
                    raise SignalStop(stop.signum)
                stop.at_once = True
                self._evaluate([k for k in self.live() if self._guard(k, self.members[k].end_training)], loggers)
            except SignalStop as exc:
                for k in self.live():
                    self.members[k].abort(exc)
                live = self.live()
                newest = next(iter(checkpoint_candidates(self.members[live[0]].run_dir)), None) if live else None
                raise self._interrupted(exc.signum, newest, written=False) from None
            except BaseException as exc:
                for k in self.live():
                    self.members[k].abort(exc)
                raise
            finally:
                stop.at_once = False

    def _interrupted(self, signum: int, checkpoint: Path | None, written: bool) -> PopulationInterrupted:
        """The stop of the live members (those a resume continues); the failed ones named apart."""
        live = [self.members[k].run_dir for k in self.live()] or [self.members[0].run_dir]
        failed = {str(self.members[k].run_dir): error for k, error in self.failed.items()}
        return PopulationInterrupted(signum, live, checkpoint, written, failed)

    def _checkpoint(self, loggers: list[Logger], scheduled: bool, signum: int | None) -> None:
        """Every live member's checkpoint; after a signal, stop (:class:`PopulationInterrupted`)."""
        done = self.updates_done >= self.cfg.num_updates
        written = None
        for k in self.live():
            loggers[k].flush()
            torch.set_rng_state(self.rng_states[k])
            written = self._guard(k, self.members[k].save, scheduled) or written
            if signum is None and not done and k not in self.failed:
                self._guard(k, self.members[k].after_checkpoint)
        if signum is not None:
            raise self._interrupted(signum, written, True)

    def _update(self, loggers: list[Logger], schedule: Schedule) -> int:
        """One update of every live member; returns the environment steps taken."""
        start = time.perf_counter()
        for k in self.live():
            set_learning_rate(self.members[k].learner, schedule, self.members[k].progress.updates_done)
        actors = [m.model.snapshot() for m in self.members]
        last = self.rollout.collect(actors)
        batches: list[MemberBatch | None] = [None] * len(self.members)
        stats: dict[int, dict[str, float] | None] = {}
        for k, values in last.items():
            m = self.members[k]
            selected = self._guard(k, m.learner.source.batches, Rollout(m.buffer, values), m.progress.updates_done)
            if selected is None:
                continue
            source, stats[k] = selected
            if self.own_updates:
                stats[k] = self._guard(k, _own_update, m, source, stats[k])
            elif self._guard(k, _each, [h.begin for h in m.learner.hooks]) is not None:
                batches[k] = MemberBatch(source.pooled, m.learner.generator, m.learner.flat, m.learner.optimizer)
        results = stacked_epochs(self.stacked, self.loss, batches, self.cfg.ppo, self.cfg.num_minibatches,
                                 self.step) \
            if self.stacked is not None and any(batches) else batches
        for k, (batch, result) in enumerate(zip(batches, results)):
            if batch is not None and result is not None and k not in self.failed:
                stats[k] = self._stacked_stats(k, batch, result, stats[k])
        seconds = time.perf_counter() - start
        steps = sum(self._log(k, scalars, seconds, loggers[k], schedule)
                    for k, scalars in stats.items() if scalars is not None and k not in self.failed)
        self.updates_done += 1
        self._evaluate([k for k in self.live() if self.members[k].evaluation_due()], loggers)
        return steps

    def _evaluate(self, due: list[int], loggers: list[Logger]) -> None:
        """The ``due`` members' evaluations of their current weights, run together; a member whose
        evaluation fails is failed."""
        if not due:
            return
        for k in due:
            self.members[k].agent.actor = self.members[k].model.snapshot()
        for k, outcome in zip(due, evaluate_together([self.members[k] for k in due])):
            if isinstance(outcome, RlkitError):
                self._fail(k, outcome)
            else:
                self._guard(k, self.members[k].record_evaluation, outcome, loggers[k])

    def _stacked_stats(self, k: int, batch: MemberBatch, result: Any,
                       stats: dict[str, float]) -> dict[str, float] | None:
        """Member ``k``'s scalars after its part of the stacked update, as a single run has them
        (None if its hooks or scalars failed it)."""
        m = self.members[k]
        scalars = self._guard(k, result.scalars, m.progress.updates_done + 1)
        ended = [functools.partial(h.end, MappingProxyType(dict(scalars))) for h in m.learner.hooks] \
            if scalars is not None else None
        hooks = self._guard(k, _each, ended) if ended is not None else None
        if scalars is None or hooks is None:
            return None
        stats.update(scalars)
        for hook_stats in hooks:
            stats.update(hook_stats)
        stats["losses/explained_variance"] = explained_variance(batch.batch.returns, batch.batch.values)
        return stats

    def _log(self, k: int, stats: dict[str, float], seconds: float, logger: Logger, schedule: Schedule) -> int:
        """Member ``k``'s scalars and progress after an update, as a single run logs them."""
        m = self.members[k]
        stats.update(m.episode_stats())
        units = m.cfg.batch_size
        m.progress.updates_done += 1
        m.progress.env_steps += units
        m.progress.seconds += seconds
        stats["charts/learning_rate"] = schedule.lr(m.progress.updates_done - 1)
        stats["charts/steps_per_second"] = units / seconds
        logger.scalars(stats, m.progress.env_steps)
        return units
