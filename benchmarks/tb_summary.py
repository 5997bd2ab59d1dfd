"""Summarize a run's TensorBoard scalars: first-k / last-k means, min, max, and block means.

Used for the per-update figures in benchmarks/RESULTS.md's RLHF assessments ("first 10 → last 10
means", "per 20-update block"). Example:

    python benchmarks/tb_summary.py runs/rlhf_sentiment7/ppo__s1__* --tags charts/score charts/kl --block 20
"""

from __future__ import annotations

import argparse
import glob
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def scalars(path: str) -> dict[str, np.ndarray]:
    """Every scalar tag of the newest event file under ``path`` (a run folder or an event file)."""
    files = [path] if Path(path).is_file() else sorted(glob.glob(f"{path}/**/events.out.tfevents.*", recursive=True))
    if not files:
        raise SystemExit(f"no TensorBoard event file under {path!r}")
    acc = EventAccumulator(max(files, key=lambda f: Path(f).stat().st_mtime), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: np.array([e.value for e in acc.Scalars(t)]) for t in acc.Tags()["scalars"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="run folder (or event file)")
    parser.add_argument("--tags", nargs="*", default=[], help="tags to show (default: all)")
    parser.add_argument("--k", type=int, default=10, help="first/last window")
    parser.add_argument("--block", type=int, default=0, help="also print means of consecutive blocks of this size")
    args = parser.parse_args()
    for tag, v in sorted(scalars(args.run).items()):
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
