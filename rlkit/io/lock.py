"""An OS lock that one process holds on a folder while it writes there (a sweep directory, a run
directory): a second process is refused in one line. The lock is released when the holder exits,
even by SIGKILL, so nothing stale is ever left to clear by hand. Without ``fcntl`` (Windows) there
is no lock."""

from __future__ import annotations

import contextlib
import os
import weakref
from pathlib import Path
from typing import IO, Any, Iterator

from rlkit.errors import ConfigError
from rlkit.io.files import check_writable

RUN_LOCK = ".rlkit-run.lock"
"""The file a training process holds locked in its run directory."""

_HELD: "weakref.WeakSet[FolderLock]" = weakref.WeakSet()
"""This process's held locks (a forked child lets go of its copies: :func:`_not_held_in_child`)."""


class FolderLock:
    """Holds ``folder/name`` locked (exclusive, non-blocking) from :meth:`acquire` to :meth:`release`.

    ``what`` names the holder in the refusal, e.g. "rlkit sweep"; ``then`` says what to do once it is gone."""

    def __init__(self, folder: Path, name: str, what: str, then: str) -> None:
        self.folder, self.path, self.what, self.then = Path(folder), Path(folder) / name, what, then
        self._handle: IO[str] | None = None

    def acquire(self) -> "FolderLock":
        """Take the lock (held already: nothing to do); another holder, or a folder this process cannot
        write in, is a one-line :class:`ConfigError`."""
        if self._handle is not None:
            return self
        try:
            import fcntl
        except ImportError:
            return self
        try:
            handle = open(self.path, "a+")
        except OSError as exc:
            raise ConfigError(f"cannot write in {self.folder}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise ConfigError(f"{self.folder} is in use by another {self.what} ({holder}); wait for it to finish "
                              f"or stop it, then {self.then}") from None
        try:
            check_writable(self.folder)  # the lock file opens in a folder that refuses new files (chattr +i)
        except ConfigError:
            handle.close()
            raise
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        self._handle = handle
        _HELD.add(self)
        return self

    def release(self) -> None:
        """Let the folder go (closing the file releases the lock); a second call does nothing."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        _HELD.discard(self)

    @property
    def held(self) -> bool:
        return self._handle is not None

    @contextlib.contextmanager
    def released_on_error(self) -> Iterator[None]:
        """Release the lock if the block raises (a set-up that fails lets the folder go at once)."""
        try:
            yield
        except BaseException:
            self.release()
            raise

    def __enter__(self) -> "FolderLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def holder(folder: Path, name: str = RUN_LOCK) -> str | None:
    """Who holds ``folder/name`` locked (its "pid N" line), or None when nobody does, there is no
    such lock file, or locks are not available; looks without writing anything."""
    try:
        import fcntl

        handle = open(Path(folder) / name)
    except (ImportError, OSError):
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return handle.read().strip() or "another process"
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None


def _not_held_in_child() -> None:
    """In a forked child (an env worker, a pool worker): its copies of the parent's locked files
    closed, so the lock goes with the parent alone (a ``flock`` lasts while any descriptor of the
    open file lives; closing the child's leaves the parent's). A child that outlives its parent
    (stuck in an env's step) then leaves the folder free for a resume."""
    for lock in list(_HELD):
        if lock._handle is not None:
            lock._handle.close()
            lock._handle = None
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_not_held_in_child)
