"""What a worker process does to never outlive the process that started it."""

from __future__ import annotations

import os
import signal
import sys


def die_with_parent(parent_pid: int) -> None:
    """On Linux, have the kernel SIGKILL this process when ``parent_pid``, its parent, dies
    (``PR_SET_PDEATHSIG``): a worker stuck in an env's step never outlives a trainer that was
    SIGKILLed. Nothing where that is not this process's parent (started by a fork server, or the
    parent is gone already: the worker then notices at its next read of the pipe) or elsewhere than
    Linux."""
    if not sys.platform.startswith("linux") or os.getppid() != parent_pid:
        return
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:  # it died before the request was made
        os._exit(1)
