"""Print a benchmark's markdown section and append it to the results file (skipped when path is '')."""

from __future__ import annotations


def emit(lines: list[str], path: str) -> None:
    text = "\n".join(lines)
    print(text)
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")
