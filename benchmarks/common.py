"""What the benchmarks share: their figures' file (this folder's README.md, each figure between its
markers, replaced by the benchmark's next run) and the step that prints a figure and writes it."""

from __future__ import annotations

from pathlib import Path

from rlkit.ablation.measurements import write_section

README = str(Path(__file__).resolve().with_name("README.md"))
"""Where a benchmark's ``--write`` puts its figure by default."""

WRITE_HELP = "file whose figure section of this benchmark is replaced (default: benchmarks/README.md; '': print only)"


def emit(lines: list[str], path: str, key: str) -> None:
    """Print ``lines`` and, unless ``path`` is '', put them between ``key``'s markers in ``path``
    (:func:`rlkit.ablation.measurements.write_section`: the figure there replaced, the rest kept)."""
    text = "\n".join(lines).strip("\n")
    print(text, flush=True)
    if path:
        write_section(path, text, key)
