"""A run's TensorBoard scalars read as TensorBoard reads them, and ``rlkit report scalars``: each
tag's first-k and last-k means, minimum, maximum and block means."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from rlkit.errors import ConfigError, one_line


def read_file(path: Path) -> dict[str, dict[int, float]]:
    """Every scalar of one event file by tag and step; ``ValueError`` when the file does not read
    to its end (a truncated or corrupted record: each record is its data plus 16 bytes of length
    and CRCs)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader

    size = sum(len(record) + 16 for record in RawEventFileLoader(str(path)).Load())
    if size != path.stat().st_size:
        raise ValueError(f"{path.name} reads {size} of its {path.stat().st_size} bytes")
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


def scalars(path: str | Path) -> dict[str, np.ndarray]:
    """Every scalar tag of a run (a run folder: all its event files) or of one event file, each
    ``[steps]`` in step order. A run's files are read in name order, as TensorBoard reads them: a
    resumed run's later file replaces the earlier files' steps from its own first step on.
    ``FileNotFoundError`` when there is no event file, ``ValueError`` when one does not read to
    its end."""
    files = [Path(path)] if Path(path).is_file() else sorted(Path(path).glob("events.out.tfevents.*"))
    if not files:
        raise FileNotFoundError(f"no TensorBoard event file in {str(path)!r}")
    merged: dict[str, dict[int, float]] = defaultdict(dict)
    for file in files:
        values = read_file(file)
        first = min((min(steps) for steps in values.values() if steps), default=None)
        for steps in merged.values() if first is not None else []:
            for step in [s for s in steps if s >= first]:
                del steps[step]
        for tag, steps in values.items():
            merged[tag].update(steps)
    return {tag: np.array([steps[s] for s in sorted(steps)]) for tag, steps in merged.items()}


def scalar_summary(run: str | Path, tags: list[str] | None = None, k: int = 10, block: int = 0) -> list[str]:
    """One line per tag of ``run`` (a run folder or one event file), in name order: its count, the
    means of its first and last ``k`` values, its minimum and maximum, and with ``block`` > 0 the
    means of consecutive blocks of that many values. ``tags`` keeps only those (default: all). A
    run without readable events is a one-line :class:`ConfigError`."""
    if k < 1 or block < 0:
        raise ConfigError(f"--k must be at least 1 and --block 0 or more, got {k} and {block}")
    try:
        values = scalars(run)
    except (OSError, ValueError) as exc:
        message = one_line(exc)
        raise ConfigError(message if str(run) in message else f"{run}: {message}") from None
    lines = []
    for tag, v in sorted(values.items()):
        if (tags and tag not in tags) or len(v) == 0:
            continue
        n = min(k, len(v))
        line = (f"{tag:34s} n={len(v):4d} first{n}={v[:n].mean():9.4g} last{n}={v[-n:].mean():9.4g} "
                f"min={v.min():9.4g} max={v.max():9.4g}")
        if block:
            line += " blocks=" + " ".join(f"{v[i:i + block].mean():.4g}" for i in range(0, len(v), block))
        lines.append(line)
    return lines
