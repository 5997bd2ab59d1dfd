"""What rlkit's measuring tools share (``rlkit report walltime|tags|staleness``, the scripts in
benchmarks/ and checks/): the machine's CPU model for a table's Machine line, a markdown section
written into a results file, and list flags that extend when repeated.

A results file holds each measurement's latest figure between its markers::

    <!-- bench:throughput -->
    ### Throughput vs SB3 — ...
    <!-- /bench:throughput -->

:func:`write_section` with a key replaces what stands between that key's markers (everything else
in the file stays as it was); without a key it appends.
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path
from typing import Any

from rlkit.errors import ConfigError, OutputError
from rlkit.io.files import write_atomic


def cpu_model() -> str:
    """The CPU's model name, with its family and model numbers where the name alone is vague ("AMD
    EPYC"), or the implementer and part numbers of an Arm CPU: machines of one kind differ by CPU,
    and so do their speeds and bits."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            first = f.read().split("\n\n")[0].splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    fields = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in first if ":" in line)}
    name = fields.get("model name") or fields.get("cpu") or platform.processor() or platform.machine()
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    elif "CPU implementer" in fields and "CPU part" in fields:
        name += f" (implementer {fields['CPU implementer']}, part {fields['CPU part']})"
    return name


def markers(key: str) -> tuple[str, str]:
    """The lines that open and close ``key``'s section of a results file."""
    return f"<!-- bench:{key} -->", f"<!-- /bench:{key} -->"


def check_target(path: str | Path) -> None:
    """A one-line :class:`ConfigError` unless a section can be written to ``path`` (an existing
    file that opens for appending, or a new one in an existing folder): checked before a
    measurement starts, so that its result is not lost to a bad ``--write``."""
    target = Path(path)
    try:
        if target.exists():
            open(target, "a", encoding="utf-8").close()
        elif not target.parent.is_dir():
            raise OSError(f"no folder {str(target.parent)!r}")
    except OSError as exc:
        raise ConfigError(f"--write {str(path)!r}: cannot write there ({exc.strerror or exc})") from None


def write_section(path: str | Path, text: str, key: str | None = None) -> None:
    """Write the markdown ``text`` into the file at ``path`` (created when missing).

    With ``key``: between the file's two marker lines of ``key`` (:func:`markers`), replacing what
    stood there, the rest of the file unchanged; a file without them gets the marked section at its
    end. A file whose markers of ``key`` are not one opening line followed by one closing line is
    refused in one line (:class:`OutputError`), unchanged. Without ``key``: appended (after a
    newline when the file does not end with one). The file is replaced in one rename."""
    path = Path(path)
    try:
        before = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise OutputError(f"could not read {path}: {exc}") from None
    body = text.strip("\n")
    if key is not None:
        write_atomic(path, _replaced(path, before, body, key))
    else:
        write_atomic(path, _ended(before) + body + "\n")


def _ended(text: str) -> str:
    """``text`` ending with a newline (unless it is empty)."""
    return text + "\n" * (bool(text) and not text.endswith("\n"))


def _replaced(path: Path, before: str, body: str, key: str) -> str:
    """``before`` with ``key``'s marked section holding ``body`` (appended when it has none)."""
    begin, end = markers(key)
    lines = before.splitlines(keepends=True)
    opens = [i for i, line in enumerate(lines) if line.strip() == begin]
    closes = [i for i, line in enumerate(lines) if line.strip() == end]
    section = f"{begin}\n{body}\n{end}\n"
    if not opens and not closes:  # a new section at the end, after a blank line
        head = _ended(before)
        return head + "\n" * (bool(head) and not head.endswith("\n\n")) + section
    if len(opens) != 1 or len(closes) != 1 or closes[0] < opens[0]:
        raise OutputError(f"{path}: the section {begin} ... {end} is not one opening line followed by one "
                          f"closing line ({len(opens)} opening, {len(closes)} closing); nothing written")
    return "".join(lines[: opens[0]]) + section + "".join(lines[closes[0] + 1:])


class ExtendList(argparse.Action):
    """A list flag (one taking several values) given more than once extends its list
    (``--seeds 1 2 --seeds 3``: 1 2 3), as ``rlkit train --seeds`` does; its default stands only
    when the flag is not given."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        current = getattr(namespace, self.dest, None)
        before = [] if current is None or current is self.default else list(current)
        setattr(namespace, self.dest, before + list(values))
