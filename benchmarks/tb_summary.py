"""Summarize a run's TensorBoard scalars: first-k / last-k means, min, max, and block means.

Used for the per-update figures in benchmarks/RESULTS.md's RLHF assessments ("first 10 → last 10
means", "per 20-update block"). Example:

    python benchmarks/tb_summary.py runs/rlhf_sentiment7/ppo__s1__* --tags charts/score charts/kl --block 20
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
from report import ExtendList


def read_file(path: Path) -> dict[str, dict[int, float]]:
    """Every scalar of one event file by tag and step; ``ValueError`` when the file does not read
    to its end (a truncated or corrupted record: each record is its data plus 16 bytes of length
    and CRCs)."""
    size = sum(len(record) + 16 for record in RawEventFileLoader(str(path)).Load())
    if size != path.stat().st_size:
        raise ValueError(f"{path.name} reads {size} of its {path.stat().st_size} bytes")
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


def scalars(path: str) -> dict[str, np.ndarray]:
    """Every scalar tag of a run (a run folder: all its event files) or of one event file, in step
    order. A run's files are read in name order, as TensorBoard reads them: a resumed run's later
    file replaces the earlier files' steps from its own first step on. ``FileNotFoundError`` when
    there is no event file, ``ValueError`` when one does not read to its end."""
    files = [Path(path)] if Path(path).is_file() else sorted(Path(path).glob("events.out.tfevents.*"))
    if not files:
        raise FileNotFoundError(f"no TensorBoard event file in {path!r}")
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="run folder (or event file)")
    parser.add_argument("--tags", nargs="*", action=ExtendList, default=[], help="tags to show (default: all)")
    parser.add_argument("--k", type=int, default=10, help="first/last window")
    parser.add_argument("--block", type=int, default=0, help="also print means of consecutive blocks of this size")
    args = parser.parse_args()
    try:
        tags = scalars(args.run)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    for tag, v in sorted(tags.items()):
        if (args.tags and tag not in args.tags) or len(v) == 0:
            continue
        k = min(args.k, len(v))
        line = (f"{tag:34s} n={len(v):4d} first{k}={v[:k].mean():9.3f} last{k}={v[-k:].mean():9.3f} "
                f"min={v.min():9.3f} max={v.max():9.3f}")
        if args.block:
            line += " blocks=" + " ".join(f"{v[i:i + args.block].mean():.2f}" for i in range(0, len(v), args.block))
        print(line)


if __name__ == "__main__":
    main()
