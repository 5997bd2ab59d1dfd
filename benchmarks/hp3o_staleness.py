"""How stale HP3O's replayed data is, per (env, variant) of a sweep: the mean over every update of
every seed of the ``hp3o/`` diagnostics (and PPO's own clip fraction and approx KL), with the final
return beside them.

A run's event files are read as TensorBoard reads them (``tb_summary.scalars``: a resumed run's
later file replaces the earlier file's steps). A run is left out, and named, when it has no event
file (records kept without them), an event file that does not read to its end (a truncated or
corrupted record) or no finite final return.

    python benchmarks/hp3o_staleness.py sweeps/hp3o_halfcheetah --write ''
    python benchmarks/hp3o_staleness.py sweeps/hp3o_halfcheetah   # appends to benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from report import cpu_model, emit
from tb_summary import scalars

COLUMNS = [("hp3o/newest_sample_frac", "newest share"), ("hp3o/sampled_age", "mean age"),
           ("hp3o/best_age", "best's age"), ("hp3o/replay_log_ratio_std", "log-ratio std"),
           ("hp3o/replay_clipfrac_newest", "clip newest"), ("hp3o/replay_clipfrac_older", "clip older"),
           ("losses/clipfrac", "clipfrac"), ("losses/approx_kl", "approx KL"), ("losses/entropy", "entropy")]


def final_return(row: dict[str, str]) -> float:
    """The run's finite final return (``ValueError`` otherwise)."""
    value = float(row["final_return"])
    if not math.isfinite(value):
        raise ValueError(f"final return {value}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir")
    parser.add_argument("--write", default="benchmarks/RESULTS.md", help="append the section here ('' to skip)")
    args = parser.parse_args()
    root = Path(args.sweep_dir)
    try:
        with open(root / "runs.csv", encoding="utf-8") as f:
            rows = [r for r in csv.DictReader(f) if r.get("status") == "done" and r.get("kind") == "rlkit"]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        parser.error(f"{args.sweep_dir}: no readable runs.csv ({type(exc).__name__})")
    per_variant: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    left: dict[str, list[str]] = defaultdict(list)  # why -> the runs left out for it
    for row in rows:
        try:
            final = final_return(row)
            tags = scalars(str(root / row["run_dir"]))
        except FileNotFoundError:
            left["no TensorBoard events (records kept without them)"].append(f"{row['env']} {row['variant']}")
            continue
        except (OSError, ValueError, KeyError, TypeError) as exc:
            left[f"unreadable ({type(exc).__name__})"].append(f"{row.get('run_dir')}")
            continue
        key = (row["env"], row["variant"])
        for tag, _ in COLUMNS:
            if tag in tags and len(tags[tag]):
                per_variant[key][tag].append(float(np.nanmean(tags[tag])))
        per_variant[key]["final"].append(final)
    if not per_variant:
        parser.error(f"{args.sweep_dir}: no finished rlkit run with readable events and a final return")
    notes = "".join(f" Left out, {why}: {len(runs)} runs ({', '.join(sorted(set(runs)))})."
                    for why, runs in left.items())
    lines = [f"\n### HP3O staleness diagnostics: {root.name} — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/hp3o_staleness.py {args.sweep_dir}`  ",
             f"Machine: {cpu_model()} (not timed)\n",
             "Each cell: the mean over seeds of a run's mean over its updates (before each update, for the replay "
             "columns); final: mean final return." + notes + "\n",
             "| env | variant | seeds | final | " + " | ".join(name for _, name in COLUMNS) + " |",
             "|---|---|---|---|" + "---|" * len(COLUMNS)]
    for (env, variant), values in per_variant.items():
        cells = [f"{np.mean(values[tag]):.3g}" if values.get(tag) else "—" for tag, _ in COLUMNS]
        lines.append(f"| {env} | {variant} | {len(values['final'])} | {np.mean(values['final']):.0f} | "
                     + " | ".join(cells) + " |")
    emit(lines, args.write)


if __name__ == "__main__":
    main()
