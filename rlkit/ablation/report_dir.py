"""The folder a report is written to: ``SWEEP_DIR/report/`` (the report's own, rewritten by each
``rlkit report``) or ``--out DIR``, which must be new, empty or an earlier rlkit report (its
``summary.json`` holds :data:`MARKER`). Rewriting an earlier report removes its figures that the
new report does not draw, so that no figure of another report stays beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from rlkit.errors import ConfigError
from rlkit.io.files import read_json

MARKER = "rlkit_report"
"""``summary.json`` key of every report: the folder holds an rlkit report, which a report may rewrite."""

FIGURES = ("per_env.png", "curves_steps.png", "curves_wallclock.png", "curves_vs_baseline.png", "aggregate.png",
           "profiles.png", "improvement.png")
"""Every figure a report can draw."""


def is_report(folder: Path) -> bool:
    """Whether ``folder`` holds a report that rlkit wrote (its ``summary.json`` is marked)."""
    summary = read_json(folder / "summary.json")
    return summary is not None and MARKER in summary


def check_out(out: Path, default: Path) -> None:
    """A one-line :class:`ConfigError` unless the report may be written to ``out``: the sweep's own
    report folder ``default``, a folder that does not exist or is empty, or an earlier report."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file; move it aside to write the report there")
    if not out.is_dir() or out.resolve() == default.resolve() or is_report(out):
        return
    if any(out.iterdir()):
        raise ConfigError(f"--out {out} holds files and is not an rlkit report (no summary.json with "
                          f"{MARKER!r}); give a new or empty folder, so that nothing of yours is overwritten")


def remove_stale(out: Path, drawn: Sequence[str]) -> list[str]:
    """Remove the figures of an earlier report in ``out`` that this one (``drawn``) does not draw;
    returns their names."""
    stale = [name for name in FIGURES if name not in drawn and (out / name).is_file()]
    for name in stale:
        (out / name).unlink()
    return stale
