"""How stale HP3O's replayed data is, per (env, variant) of a sweep: the mean over every update of
every seed of the ``hp3o/`` diagnostics (and PPO's own clip fraction and approx KL), with the final
return beside them.

    python benchmarks/hp3o_staleness.py sweeps/hp3o_halfcheetah --write ''
    python benchmarks/hp3o_staleness.py sweeps/hp3o_halfcheetah   # appends to benchmarks/RESULTS.md
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
from report import emit
from tb_summary import scalars

COLUMNS = [("hp3o/newest_sample_frac", "newest share"), ("hp3o/sampled_age", "mean age"),
           ("hp3o/best_age", "best's age"), ("hp3o/replay_log_ratio_std", "log-ratio std"),
           ("hp3o/replay_clipfrac_newest", "clip newest"), ("hp3o/replay_clipfrac_older", "clip older"),
           ("losses/clipfrac", "clipfrac"), ("losses/approx_kl", "approx KL"), ("losses/entropy", "entropy")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir")
    parser.add_argument("--write", default="benchmarks/RESULTS.md", help="append the section here ('' to skip)")
    args = parser.parse_args()
    root = Path(args.sweep_dir)
    with open(root / "runs.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "done" and r["kind"] == "rlkit"]
    per_variant: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    without: list[tuple[str, str]] = []  # (variant, env) of runs restored from kept records (result.json only)
    for row in rows:
        if not any((root / row["run_dir"]).glob("events.out.tfevents.*")):
            without.append((row["variant"], row["env"]))
            continue
        tags = scalars(str(root / row["run_dir"]))
        key = (row["env"], row["variant"])
        for tag, _ in COLUMNS:
            if tag in tags and len(tags[tag]):
                per_variant[key][tag].append(float(np.nanmean(tags[tag])))
        per_variant[key]["final"].append(float(row["final_return"]))
    lines = [f"\n### HP3O staleness diagnostics: {root.name} — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/hp3o_staleness.py {args.sweep_dir}`  ",
             f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores\n",
             "Each cell: the mean over seeds of a run's mean over its updates (before each update, for the replay "
             "columns); final: mean final return." + (f" Left out, no TensorBoard events (records kept without "
             f"them): {len(without)} runs ({', '.join(f'{v} / {e}' for v, e in sorted(set(without)))})."
             if without else "") + "\n",
             "| env | variant | seeds | final | " + " | ".join(name for _, name in COLUMNS) + " |",
             "|---|---|---|---|" + "---|" * len(COLUMNS)]
    for (env, variant), values in per_variant.items():
        cells = [f"{np.mean(values[tag]):.3g}" if values.get(tag) else "—" for tag, _ in COLUMNS]
        lines.append(f"| {env} | {variant} | {len(values['final'])} | {np.mean(values['final']):.0f} | " + " | ".join(cells)
                     + " |")
    emit(lines, args.write)


if __name__ == "__main__":
    main()
