"""rlkit's one progress bar for every long phase: tqdm on stderr, shown only on a terminal.

A bar is drawn only when the caller enables it and stderr is a terminal, so a log file or a pipe
never receives carriage returns or escape codes.
"""

from __future__ import annotations

import os
import sys
import threading

from tqdm import tqdm


def progress_bar(total: float | None, unit: str, enabled: bool = True, desc: str | None = None,
                 initial: float = 0) -> tqdm:
    """A bar of ``total`` ``unit``s (None: a counter without an end), drawn when ``enabled`` and
    stderr is a terminal; otherwise a disabled bar whose methods do nothing."""
    show = enabled and sys.stderr.isatty()
    sized = show and _columns() > 0  # a terminal that reports no size (e.g. under `script`) gets 80 x 24
    return tqdm(total=total, initial=initial, unit=unit, desc=desc, file=sys.stderr, dynamic_ncols=sized,
                ncols=None if sized else 80, nrows=None if sized else 24, disable=not show)


def thread_lock_only() -> None:
    """This process's bars lock with a thread lock alone: tqdm's default lock also makes a named
    semaphore, which a process killed with SIGKILL leaves for Python's resource tracker to report
    (a warning on the sweep's stderr). A sweep worker draws no bar, so no other process shares it."""
    tqdm.set_lock(threading.RLock())


def _columns() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        return 0
