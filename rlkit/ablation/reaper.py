"""A watchdog that stops the processes of a sweep's own Ray instance when the sweep dies.

``ray.init()`` without an address starts a local Ray instance (GCS, raylet, dashboard, agents,
workers) as the sweep's descendants; ``ray.shutdown()`` stops them, but a sweep killed with
SIGKILL (or out of memory) never calls it, and Ray's agents outlive it. The watchdog runs in its
own session, records the sweep's descendants every half second while the sweep lives, and once
the sweep is gone (its pipe closes: any exit, SIGKILL included) terminates those it recorded that
are still the same processes (same start time), then kills what is left after a grace period.

Run as ``python reaper.py PID [KEEP...]`` (KEEP: descendants already there, not the Ray instance's;
the file alone, without importing rlkit, so it watches from
its first moment); :func:`start_reaper` starts it.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from typing import Any

POLL_S = 0.5
GRACE_S = 3.0


def start_reaper(records: Any = subprocess.DEVNULL) -> subprocess.Popen[bytes] | None:
    """The watchdog of this process's descendants from now on (None without ``psutil``, which Ray
    installs); close its ``stdin`` when they are stopped (or let this process die) and it reaps
    what remains. It writes the pid of each process it records to ``records`` (a file; nowhere by
    default), one a line, as it records it."""
    try:
        keep = [str(pid) for pid in _descendants(os.getpid())]
    except ImportError:
        return None
    return subprocess.Popen([sys.executable, __file__, str(os.getpid()), *keep],
                            stdin=subprocess.PIPE, stdout=records, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def stop_reaper(reaper: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Tell the watchdog the sweep is done (it reaps any leftover descendant) and wait for it."""
    if reaper.stdin is not None:
        reaper.stdin.close()
    try:
        reaper.wait(timeout)
    except subprocess.TimeoutExpired:
        reaper.kill()


def _descendants(pid: int) -> dict[int, float]:
    """``{pid: start time}`` of every descendant of ``pid`` (empty once it is gone)."""
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return {}
    found = {}
    for child in children:
        try:
            found[child.pid] = child.create_time()
        except psutil.Error:
            continue
    return found


def _reap(recorded: dict[int, float]) -> None:
    """Terminate, then kill after :data:`GRACE_S`, every recorded process still alive as itself."""
    import psutil

    procs: list[Any] = []
    for pid, started in recorded.items():
        try:
            proc = psutil.Process(pid)
            if proc.create_time() == started:  # not a later process that reuses the pid
                proc.terminate()
                procs.append(proc)
        except psutil.Error:
            continue
    _, alive = psutil.wait_procs(procs, timeout=GRACE_S)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            continue


def watch(pid: int, keep: set[int]) -> None:
    """Record ``pid``'s descendants but ``keep`` (those the caller started before the Ray instance),
    each named on standard output as it is recorded, until standard input closes, then reap them."""
    recorded: dict[int, float] = {}
    keep = keep | {os.getpid()}
    while True:
        seen = {p: t for p, t in _descendants(pid).items() if p not in keep}
        new = [p for p in seen if p not in recorded]
        recorded.update(seen)
        if new:  # the records: one pid a line (see start_reaper)
            sys.stdout.write("".join(f"{p}\n" for p in new))
            sys.stdout.flush()
        ready, _, _ = select.select([sys.stdin], [], [], POLL_S)
        if ready and not os.read(sys.stdin.fileno(), 1024):
            break
    _reap(recorded)


if __name__ == "__main__":
    watch(int(sys.argv[1]), {int(p) for p in sys.argv[2:]})
