"""What every benchmark shares: its markdown section printed and appended to the results file, the
machine's CPU model for its Machine line, list flags that extend when repeated."""

from __future__ import annotations

import argparse
import platform
from typing import Any


def emit(lines: list[str], path: str) -> None:
    """Print ``lines`` and append them to ``path`` (skipped when ``path`` is '')."""
    text = "\n".join(lines)
    print(text)
    if path:
        with open(path, "a+b") as f:
            f.seek(0, 2)
            unterminated = f.tell() > 0 and (f.seek(-1, 2), f.read(1))[1] != b"\n"
            f.write(("\n" * unterminated + text + "\n").encode("utf-8"))


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


class ExtendList(argparse.Action):
    """A list flag (one taking several values) given more than once extends its list
    (``--seeds 1 2 --seeds 3``: 1 2 3), as ``rlkit train --seeds`` does; its default stands only
    when the flag is not given."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        current = getattr(namespace, self.dest, None)
        before = [] if current is None or current is self.default else list(current)
        setattr(namespace, self.dest, before + list(values))
