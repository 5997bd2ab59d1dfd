"""Per (variant, env) of a sweep, from its finished rlkit runs' TensorBoard events (read as
TensorBoard reads them, :func:`~rlkit.ablation.events.scalars`): ``rlkit report tags`` (the mean
over seeds of each run's first-k and last-k values of chosen tags) and ``rlkit report staleness``
(HP3O's replay diagnostics beside the final return). Runs whose events are missing or do not read
to their end are left out and named; a sweep with nothing readable is a one-line error."""

from __future__ import annotations

import csv
import math
import os
import platform
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from rlkit.ablation.events import scalars
from rlkit.ablation.measurements import cpu_model
from rlkit.ablation.results import read_manifest
from rlkit.errors import ConfigError

STALENESS_TAGS = [("hp3o/newest_sample_frac", "newest share"), ("hp3o/sampled_age", "mean age"),
                  ("hp3o/best_age", "best's age"), ("hp3o/replay_log_ratio_std", "log-ratio std"),
                  ("hp3o/replay_clipfrac_newest", "clip newest"), ("hp3o/replay_clipfrac_older", "clip older"),
                  ("losses/clipfrac", "clipfrac"), ("losses/approx_kl", "approx KL"), ("losses/entropy", "entropy")]
"""The tags ``rlkit report staleness`` averages, with their column names."""


def finished_runs(sweep_dir: str | Path, env: str | None = None) -> list[dict[str, str]]:
    """The rows of the sweep's runs.csv for its finished rlkit runs (of ``env`` only, when given);
    a folder without a sweep's manifest or a readable runs.csv is a one-line :class:`ConfigError`."""
    read_manifest(Path(sweep_dir))  # a runs.csv outside a sweep folder is not a sweep's
    try:
        with open(Path(sweep_dir) / "runs.csv", encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{sweep_dir}: no readable runs.csv ({type(exc).__name__})") from None
    return [r for r in rows if r.get("status") == "done" and r.get("kind") == "rlkit"
            and (env is None or r.get("env") == env)]


def sweep_tags(sweep_dir: str | Path, tags: list[str], env: str | None = None, k: int = 10) -> list[str]:
    """A markdown section: per (variant, env, tag), the mean over seeds of each run's mean over its
    first and over its last ``k`` values (e.g. how an outer update's norm or the approx KL evolves)."""
    if k < 1:
        raise ConfigError(f"--k must be at least 1, got {k}")
    root = Path(sweep_dir)
    cells: dict[tuple[str, str, str], list[tuple[float, float]]] = defaultdict(list)
    unread = []  # runs without readable events (records kept without them, a damaged file)
    rows = finished_runs(root, env)
    for row in rows:
        try:
            values = scalars(root / row["run_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            unread.append(row.get("run_dir"))
            continue
        for tag in tags:
            if tag in values and len(values[tag]):
                v = values[tag]
                cells[(row["variant"], row["env"], tag)].append((v[:k].mean(), v[-k:].mean()))
    if len(unread) == len(rows):
        of = f" of {env}" if env else ""
        raise ConfigError(f"{sweep_dir}: no finished rlkit run{of}" if not rows else
                          f"{sweep_dir}: none of the {len(rows)} finished rlkit runs{of} has readable TensorBoard events")
    lines = [f"### Sweep tags: {root.name} — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `rlkit report tags {sweep_dir}" + (f" --env {env}" if env else "")
             + f" --tags {' '.join(tags)} --k {k}`  ",
             f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores\n",
             f"Mean over seeds of each run's mean over its first and last {k} updates."
             + (f" Left out, no readable TensorBoard events: {len(unread)} runs." if unread else "")
             + "".join(f" No run logged {t}." for t in tags if not any(c[2] == t for c in cells)) + "\n",
             "| variant | env | tag | seeds | first | last |", "|---|---|---|---|---|---|"]
    for (variant, run_env, tag), pairs in cells.items():
        first, last = np.mean([p[0] for p in pairs]), np.mean([p[1] for p in pairs])
        lines.append(f"| {variant} | {run_env} | {tag} | {len(pairs)} | {first:.3g} | {last:.3g} |")
    return lines


def final_return(row: dict[str, str]) -> float:
    """The run's finite final return (``ValueError`` otherwise)."""
    value = float(row["final_return"])
    if not math.isfinite(value):
        raise ValueError(f"final return {value}")
    return value


def staleness(sweep_dir: str | Path) -> list[str]:
    """A markdown section: how stale HP3O's replayed data is, per (env, variant): the mean over
    seeds of each run's mean over its updates of the ``hp3o/`` diagnostics (and PPO's own clip
    fraction and approx KL), with the mean final return. A run with no event file, an event file
    that does not read to its end or no finite final return is left out and named."""
    root = Path(sweep_dir)
    per_variant: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    left: dict[str, list[str]] = defaultdict(list)  # why -> the runs left out for it
    for row in finished_runs(root):
        try:
            final = final_return(row)
        except (KeyError, ValueError):
            left["no finite final return"].append(f"{row.get('run_dir')}")
            continue
        try:
            values = scalars(root / row["run_dir"])
        except FileNotFoundError:
            left["no TensorBoard events (records kept without them)"].append(f"{row['env']} {row['variant']}")
            continue
        except (OSError, ValueError, KeyError, TypeError) as exc:
            left[f"unreadable ({type(exc).__name__})"].append(f"{row.get('run_dir')}")
            continue
        key = (row["env"], row["variant"])
        for tag, _ in STALENESS_TAGS:
            if tag in values and len(values[tag]):
                per_variant[key][tag].append(float(np.nanmean(values[tag])))
        per_variant[key]["final"].append(final)
    if not per_variant:
        raise ConfigError(f"{sweep_dir}: no finished rlkit run with readable events and a final return")
    notes = "".join(f" Left out, {why}: {len(runs)} runs ({', '.join(sorted(set(runs)))})."
                    for why, runs in left.items())
    if not any(tag.startswith("hp3o/") and v.get(tag) for v in per_variant.values() for tag, _ in STALENESS_TAGS):
        notes += " No run logged HP3O's replay diagnostics (the sweep has no HP3O variant): only PPO's columns."
    lines = [f"### HP3O staleness diagnostics: {root.name} — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `rlkit report staleness {sweep_dir}`  ",
             f"Machine: {cpu_model()} (not timed)\n",
             "Each cell: the mean over seeds of a run's mean over its updates (before each update, for the replay "
             "columns); final: mean final return." + notes + "\n",
             "| env | variant | seeds | final | " + " | ".join(name for _, name in STALENESS_TAGS) + " |",
             "|---|---|---|---|" + "---|" * len(STALENESS_TAGS)]
    for (env, variant), values in per_variant.items():
        cells = [f"{np.mean(values[tag]):.3g}" if values.get(tag) else "—" for tag, _ in STALENESS_TAGS]
        lines.append(f"| {env} | {variant} | {len(values['final'])} | {np.mean(values['final']):.0f} | "
                     + " | ".join(cells) + " |")
    return lines
