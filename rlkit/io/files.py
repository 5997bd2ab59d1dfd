"""Small files that must never be seen half-written: JSON records of runs and sweeps.

Every such file is written whole to a temporary file beside it and renamed over it, so a kill
or a full disk at any moment leaves either the old file or the new one. Readers treat a missing
or damaged file alike (:func:`read_json` returns None): a run whose ``result.json`` is damaged
is "not finished" and resumes from its checkpoints instead of stopping a sweep.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from rlkit.errors import ConfigError, OutputError


def write_atomic(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename (the temporary file carries the writer's pid,
    so two processes writing the same file never share it). A failure (a full disk, a file or
    folder made immutable) is a one-line :class:`OutputError` naming the file, which is intact."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, OutputError):
            raise OutputError(f"could not write {path}: {exc.strerror or exc}") from None
        raise


def write_new(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path``, which must not exist: a file another process made there meanwhile
    is kept and the write is a one-line :class:`OutputError` (the text is written whole first and
    then linked into place, which fails rather than replaces)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write_atomic(tmp, text)
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise OutputError(f"{path} appeared while this ran; it is kept, nothing was written") from None
    except OSError as exc:
        raise OutputError(f"could not write {path}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _umask() -> int:
    with contextlib.suppress(OSError, ValueError, StopIteration):  # Linux shows it; elsewhere reading it means setting it
        status = Path("/proc/self/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Umask:")), 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def mode_as_created(*paths: str | Path) -> None:
    """Give files another writer made (safetensors writes its files 0600) the mode a plain ``open``
    gives: 0666 less the umask (read at each call), so a run's weights are readable wherever its
    JSON files are. A file system that refuses the change keeps the writer's mode: the file is whole."""
    mode = 0o666 & ~_umask()
    for path in paths:
        with contextlib.suppress(OSError):
            os.chmod(path, mode)


def is_partial(name: str) -> bool:
    """Whether ``name`` is a writer's temporary file or folder (``.NAME.PID.tmp`` of
    :func:`write_atomic`, ``.NAME.tmp`` of a checkpoint): what a kill before its rename leaves."""
    return name.startswith(".") and name.endswith(".tmp")


def check_writable(folder: str | Path) -> None:
    """A one-line :class:`ConfigError` unless this process can create and remove a file in
    ``folder`` (what every atomic write there does): an immutable (``chattr +i``), read-only or
    append-only folder is refused before anything is written, not found out by the first write,
    mid-run. The probe is a writer's temporary file (:func:`is_partial`)."""
    probe = Path(folder) / f".rlkit-write-probe.{os.getpid()}.tmp"
    try:
        with open(probe, "x"):
            pass
        probe.unlink()
    except FileExistsError:  # a probe of this pid left by a killed process: remove it, then try again
        try:
            probe.unlink()
        except OSError as exc:
            raise ConfigError(f"cannot write in {folder}: {exc.strerror or exc}") from None
        check_writable(folder)
    except OSError as exc:
        raise ConfigError(f"cannot write in {folder}: {exc.strerror or exc}") from None


def write_json(path: str | Path, value: Any, indent: int | None = 1) -> None:
    """``value`` as JSON, written atomically."""
    write_atomic(path, json.dumps(value, indent=indent))


def read_json(path: str | Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when it is missing, unreadable, damaged or not an object."""
    try:
        value = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: nesting too deep
        return None
    return value if isinstance(value, dict) else None


def read_lines(path: str | Path, what: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of every non-blank line of the UTF-8 text file ``path``; a missing
    file, a folder or a binary file is a one-line :class:`ConfigError` naming ``what`` it should be."""
    file = Path(path)
    if file.is_dir():
        raise ConfigError(f"{what} {str(path)!r} is a folder, not a file")
    if not file.is_file():
        raise ConfigError(f"{what} {str(path)!r} not found")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {str(path)!r} is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from None
    if "\x00" in text:
        raise ConfigError(f"{what} {str(path)!r} is not text (it holds NUL bytes)")
    return [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()]
