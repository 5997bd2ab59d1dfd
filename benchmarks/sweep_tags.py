"""Per variant and env of a sweep: the mean over seeds of each run's first-k and last-k values of
TensorBoard tags (e.g. how an outer update's norm or the approx KL evolves), for readings of
sweep results.

    python benchmarks/sweep_tags.py sweeps/outer_biased_init --env Hopper-v5 --tags outer/update_norm losses/approx_kl
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from report import ExtendList, emit
from tb_summary import scalars


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir")
    parser.add_argument("--tags", nargs="+", action=ExtendList, required=True)
    parser.add_argument("--env", default=None, help="only this env (default: every env)")
    parser.add_argument("--k", type=int, default=10, help="first/last window in updates")
    parser.add_argument("--write", default="benchmarks/RESULTS.md", help="append the section here ('' to skip)")
    args = parser.parse_args()
    root = Path(args.sweep_dir)
    with open(root / "runs.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "done" and r["kind"] == "rlkit"
                and (args.env is None or r["env"] == args.env)]
    cells: dict[tuple[str, str, str], list[tuple[float, float]]] = defaultdict(list)
    unread = []  # runs without readable events (records kept without them, a damaged file)
    for row in rows:
        try:
            tags = scalars(str(root / row["run_dir"]))
        except (OSError, ValueError):
            unread.append(row["run_dir"])
            continue
        for tag in args.tags:
            if tag in tags and len(tags[tag]):
                values = tags[tag]
                cells[(row["variant"], row["env"], tag)].append((values[:args.k].mean(), values[-args.k:].mean()))
    lines = [f"\n### Sweep tags: {root.name} — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/sweep_tags.py {args.sweep_dir}"
             + (f" --env {args.env}" if args.env else "") + f" --tags {' '.join(args.tags)} --k {args.k}`  ",
             f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores\n",
             f"Mean over seeds of each run's mean over its first and last {args.k} updates."
             + (f" Left out, no readable TensorBoard events: {len(unread)} runs." if unread else "") + "\n",
             "| variant | env | tag | seeds | first | last |", "|---|---|---|---|---|---|"]
    for (variant, env, tag), pairs in cells.items():
        first, last = np.mean([p[0] for p in pairs]), np.mean([p[1] for p in pairs])
        lines.append(f"| {variant} | {env} | {tag} | {len(pairs)} | {first:.3g} | {last:.3g} |")
    emit(lines, args.write)


if __name__ == "__main__":
    main()
