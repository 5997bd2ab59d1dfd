"""What a worker process does to never outlive the process that started it."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

CHECK_SECONDS = 0.5
"""How often a worker looks whether its owner still lives."""


def owner_gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (a zombie, not yet reaped, counts as exited)."""
    if os.getppid() == pid:  # its direct child, not orphaned: alive
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:  # no /proc (not Linux): whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def die_with_owner(pid: int | None = None) -> None:
    """This worker exits (``os._exit``) within :data:`CHECK_SECONDS` of the death of process
    ``pid`` (default: the process that started it, as multiprocessing knows it — the requester,
    not the fork server, under ``forkserver``), even while its main thread is stuck in an env's
    step. A daemon thread looks; unlike the kernel's ``PR_SET_PDEATHSIG``, which fires when the
    parent *thread* ends, it follows the owner process whichever of its threads made the worker."""
    if pid is None:
        parent = multiprocessing.parent_process()
        if parent is None or parent.pid is None:
            return
        pid = parent.pid

    def watch() -> None:
        while not owner_gone(pid):
            time.sleep(CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="rlkit-owner-watch", daemon=True).start()
