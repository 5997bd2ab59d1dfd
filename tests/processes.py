"""Waiting on what other processes do, as tests observe it on Linux (``/proc``): their children,
whether they live, their state. Every wait polls for an event and takes a generous bound that only
ends a hang; none is a claim about time."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterable

HANG_SECONDS = 120.0
"""The default bound of a wait: far beyond any event's time on a loaded machine."""


def wait_until(condition: Callable[[], object], seconds: float = HANG_SECONDS, poll: float = 0.01) -> bool:
    """Whether ``condition()`` came true before ``seconds`` passed (polled every ``poll`` s)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True


def state(pid: int) -> str | None:
    """The process's state letter in ``/proc/PID/stat`` (``R``, ``S``, ``T``, ``Z``...), None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Whether the process exists and has not exited (a zombie has)."""
    return state(pid) not in (None, "Z", "X")


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def wait_gone(pids: Iterable[int], seconds: float = HANG_SECONDS) -> list[int]:
    """Those of ``pids`` still alive once all have exited or ``seconds`` have passed."""
    pids = list(pids)
    wait_until(lambda: not any(alive(p) for p in pids), seconds, poll=0.02)
    return [p for p in pids if alive(p)]



def signal_set(pid: int, field: str = "SigIgn") -> set[int]:
    """The signals in process ``pid``'s ``/proc/PID/status`` mask ``field``: ``SigIgn`` (ignored),
    ``SigBlk`` (blocked by its main thread), ``SigCgt`` (caught); empty when it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return set()
    mask = int(next(x for x in text.splitlines() if x.startswith(field + ":")).split()[1], 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}
