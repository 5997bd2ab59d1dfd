"""A run's directory and its result file: the directory made exclusively (or the resumed run's)
and locked for this process, the default name's timestamp, and ``result.json``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, NamedTuple

from rlkit.io.checkpoint import is_run_dir, new_run_dir, no_checkpoint_error, run_dir_of
from rlkit.io.files import check_writable, write_json
from rlkit.io.lock import RUN_LOCK, FolderLock


class RunDir(NamedTuple):
    """A run's directory and this process's lock on it."""

    path: Path
    lock: FolderLock
    """Held until the run ends: a second process training the same run (two ``--resume``) is
    refused in one line, and so is a directory this process cannot write."""


def open_run_dir(logdir: str, run_name: str | None, default_name: str, resume: str | None) -> RunDir:
    """The resumed run's directory, or a new one made exclusively: ``logdir/run_name`` (refused
    if it exists) or ``logdir/default_name`` (numbered on a clash, e.g. runs started together);
    locked for this process."""
    path = run_dir_of(resume) if resume else new_run_dir(logdir, run_name or default_name,
                                                         numbered=run_name is None)
    if resume and not is_run_dir(path):
        raise no_checkpoint_error(resume)  # not a run: nothing is locked (or written) there
    lock = FolderLock(path, RUN_LOCK, "rlkit process", "resume it again").acquire()  # checks path is writable
    if resume and (path / "checkpoints").is_dir():
        with lock.released_on_error():
            check_writable(path / "checkpoints")  # where a resumed run writes its next checkpoint
    return RunDir(path, lock)


def timestamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def write_result(run_dir: Path, result: Mapping[str, Any]) -> None:
    """``result.json`` (what the CLI prints as one line), written atomically: a sweep counts a run
    with a readable ``result.json`` as finished."""
    write_json(run_dir / "result.json", dict(result))
