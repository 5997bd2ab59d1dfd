"""Signals and a run: SIGINT or SIGTERM asks a run to stop after the update in flight, with a
checkpoint; a second signal stops it at once, and so does a wait on environments that outlasts a
grace period after the first (an env stuck in its step would otherwise never let the update end).
A run's update loop and a population's use these; the CLI owns the handlers from a run's
start-up on.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from pathlib import Path
from typing import Iterator

from rlkit.io.checkpoint import checkpoint_candidates, resumes_exactly


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped a run: after the update in flight with a checkpoint written
    (``written``), or at once (a second signal, or one during the final evaluation) with the newest
    checkpoint on disk standing (``checkpoint`` None: the run has none yet). ``reason``: why a stop
    that one signal asked for came at once (what was waited for past the grace), else None."""

    def __init__(self, signum: int, run_dir: Path, checkpoint: Path | None, written: bool = True,
                 reason: str | None = None) -> None:
        where = f"checkpoint {checkpoint.name}" if checkpoint is not None else "no checkpoint"
        why = f" ({reason})" if reason else ""
        super().__init__(f"{signal.Signals(signum).name}: {where} in {run_dir}{why}")
        self.signum, self.run_dir, self.checkpoint, self.written = signum, run_dir, checkpoint, written
        self.reason = reason

    def stopped(self) -> str:
        """What the stop left (after why it came at once, when a wait was given up): the checkpoint
        written (or standing) and where a resume starts."""
        return f"{self.reason}; {self._left()}" if self.reason else self._left()

    def _left(self) -> str:
        if self.checkpoint is None:
            return "stopped at once; the run has no checkpoint yet (a resume starts it again)"
        what = (f"stopped after the update in flight; checkpoint {self.checkpoint.name} written" if self.written else
                f"stopped at once; its newest checkpoint {self.checkpoint.name} stands")
        if resumes_exactly(self.checkpoint):
            return what
        exact = next((c.name for c in checkpoint_candidates(self.run_dir) if resumes_exactly(c)), None)
        return what + (f" (a resume recomputes from {exact}, the newest scheduled checkpoint, to the numbers of an "
                       "uninterrupted run)" if exact else " (a resume recomputes from the start, before which no "
                       "checkpoint was scheduled, to the numbers of an uninterrupted run)")


class SignalStop(KeyboardInterrupt):
    """A signal that stops the run at once (see :func:`stop_on_signals`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOP_GRACE_SECONDS = 5.0
"""After the first SIGINT or SIGTERM, how long one wait on environments (a step, a reset, a
population's env worker answering) may still last before it is given up (:class:`EnvStuck`): an
env stuck in its step would otherwise keep the run from ever reaching the end of its update."""


class EnvStuck(SignalStop):
    """A wait on environments outlasted :data:`STOP_GRACE_SECONDS` after the first signal. A single
    run stops at once (its newest checkpoint stands); a population fails the members whose envs
    were waited for and checkpoints the others after the update in flight."""

    def __init__(self, signum: int, seconds: float) -> None:
        super().__init__(signum)
        self.seconds = seconds
        self.message = self.waited_for("return from a step")

    def waited_for(self, what: str) -> str:
        """``the envs did not WHAT within N s of SIGNAL: given up``."""
        return f"the envs did not {what} within {self.seconds:.0f} s of {signal.Signals(self.signum).name}: given up"


class StopRequest:
    """What the signals received ask of the run (shared by nested :func:`stop_on_signals`)."""

    signum: int | None = None
    """The first signal received (the run stops after the update in flight)."""
    at_once: bool = False
    """Set while nothing is left to save (the final evaluation): the first signal stops at once."""
    over: bool = False
    """Set once the command only reports its outcome: signals are ignored (the outcome stands)."""
    signalled_at: float = 0.0
    """``time.monotonic()`` when the first signal arrived."""
    waiting_since: float | None = None
    """``time.monotonic()`` when the wait on environments in progress began (None: none is)."""


_ACTIVE: list[StopRequest] = []
"""The request of the outermost :func:`stop_on_signals` in effect (signal handlers are per process)."""


@contextlib.contextmanager
def env_wait() -> Iterator[None]:
    """Marks a wait on environments (a step, a reset, an env worker's answer): after a stop signal,
    one that lasts :data:`STOP_GRACE_SECONDS` raises :class:`EnvStuck` where it waits. Nested
    waits are one wait."""
    request = _ACTIVE[0] if _ACTIVE else None
    untimed = request is None or request.waiting_since is not None  # no run, or a wait already timed
    if untimed or threading.current_thread() is not threading.main_thread():
        yield
        return
    request.waiting_since = time.monotonic()
    if request.signum is not None and hasattr(signal, "SIGALRM"):
        _arm(STOP_GRACE_SECONDS)  # after a stop: this wait's own grace (code that ran since may have cleared the timer)
    try:
        yield
    finally:
        request.waiting_since = None


def raise_if_stopped() -> None:
    """Raise :class:`SignalStop` if a stop signal has arrived (code that caught the one raised in it
    does not keep a command that stops at once from stopping)."""
    if _ACTIVE and _ACTIVE[0].signum is not None:
        raise SignalStop(_ACTIVE[0].signum)


@contextlib.contextmanager
def handlers_kept() -> Iterator[None]:
    """Runs code that may change the process's SIGINT, SIGTERM or SIGALRM handlers (a user's
    function: one that ignores Ctrl-C, a library's own alarm) and puts back the ones in effect before."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signums = [s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGALRM", None)) if s is not None]
    before = {s: signal.getsignal(s) for s in signums}
    try:
        yield
    finally:
        for s, handler in before.items():
            if signal.getsignal(s) is not handler and handler is not None:
                signal.signal(s, handler)


def from_a_signal(exc: KeyboardInterrupt) -> bool:
    """Whether ``exc`` is the user's SIGINT or SIGTERM rather than one that code (an env's
    ``close()``, a simulator's binding) raised itself. While :func:`stop_on_signals` is in effect
    a signal raises :class:`SignalStop` or only asks for a stop, so a plain KeyboardInterrupt is
    the code's own; without it (the Python API, no handlers of rlkit) a Ctrl-C cannot be told
    apart and counts as one."""
    return isinstance(exc, SignalStop) or not (_ACTIVE or _RAISING)


_RAISING: list[int] = []
"""The signals of the :func:`interrupt_on` in effect."""


@contextlib.contextmanager
def interrupt_on(*signums: int) -> Iterator[None]:
    """Each of ``signums`` raises :class:`SignalStop` (a KeyboardInterrupt) meanwhile, in the main
    thread (elsewhere nothing changes), also where the process was started with SIGINT ignored (a
    background job of a script). A sweep takes SIGINT and SIGTERM this way, and a run executing
    in a sweep's worker SIGINT (its training loop turns it into "checkpoint after this update and
    stop")."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise SignalStop(signum)

    previous = {s: signal.signal(s, interrupt) for s in signums}
    _RAISING.extend(signums)
    try:
        yield
    finally:
        del _RAISING[-len(signums):]
        for s, handler in previous.items():
            signal.signal(s, handler)


def _arm(seconds: float) -> None:
    """SIGALRM in ``seconds`` (0: none), where the platform has interval timers."""
    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, seconds)


def _grace_over(request: StopRequest) -> float | None:
    """Seconds the wait on environments in progress has lasted since the first signal, once they
    reach :data:`STOP_GRACE_SECONDS` (None before, or when nothing waits; SIGALRM is re-armed for
    the next look)."""
    since = request.waiting_since
    waited = time.monotonic() - max(since, request.signalled_at) if since is not None else 0.0
    if since is None or waited < STOP_GRACE_SECONDS:
        _arm(STOP_GRACE_SECONDS - waited)
        return None
    _arm(STOP_GRACE_SECONDS)  # a population goes on without the stuck envs: the next wait is timed afresh
    return waited


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """The first SIGINT or SIGTERM asks the run to stop after the update in flight (and write a
    checkpoint); a second one stops at once (:class:`SignalStop`), and so does a wait on
    environments that outlasts :data:`STOP_GRACE_SECONDS` after the first (:class:`EnvStuck`, see
    :func:`env_wait`). Nested uses share the outermost
    request: the CLI enters it before a run's start-up (env workers, model loading), so a signal
    then is honoured at the first update rather than lost, and keeps it while it reports the
    outcome (``over``), so a late signal cannot turn a finished or checkpointed run into a
    traceback. Only the main thread can own signal handlers."""
    if _ACTIVE:
        yield _ACTIVE[0]
        return
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handler(signum: int, frame: object) -> None:
        if request.over:
            return
        first = request.signum is None
        if first:  # the grace period for envs stuck in a step (or in closing, once the run stops) starts
            request.signum, request.signalled_at = signum, time.monotonic()
            if hasattr(signal, "SIGALRM"):  # POSIX; taken from here on only (an env's own alarm keeps it till then)
                old[signal.SIGALRM] = signal.signal(signal.SIGALRM, alarm)
                _arm(STOP_GRACE_SECONDS)
        if not first or request.at_once:
            request.over = True  # the stop is under way; what follows only reports it
            raise SignalStop(signum)

    def alarm(signum: int, frame: object) -> None:
        waited = _grace_over(request)  # (also once the stop is under way: closing envs after it waits too)
        if waited is not None:
            raise EnvStuck(request.signum, waited)  # type: ignore[arg-type]  (set before the timer is)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    _ACTIVE.append(request)
    try:
        yield request
    finally:
        if len(old) > 2:  # the grace timer was taken: stopped before its handler is given back
            _arm(0)
        _ACTIVE.remove(request)
        for s, previous in old.items():
            signal.signal(s, previous)
