"""What every benchmark shares: its markdown section printed and appended to the results file, the
machine's CPU model for its Machine line."""

from __future__ import annotations

import platform


def emit(lines: list[str], path: str) -> None:
    """Print ``lines`` and append them to ``path`` (skipped when ``path`` is '')."""
    text = "\n".join(lines)
    print(text)
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


def cpu_model() -> str:
    """The CPU's model name, with its family and model numbers where the name alone is vague ("AMD
    EPYC"): machines of one kind differ by CPU, and so do their speeds and bits."""
    try:
        with open("/proc/cpuinfo") as f:
            fields = dict(line.split(":", 1) for line in f.read().split("\n\n")[0].splitlines() if ":" in line)
    except OSError:
        return platform.processor() or platform.machine()
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    name = fields.get("model name", platform.machine())
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name
