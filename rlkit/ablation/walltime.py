"""``rlkit report walltime``: a finished sweep's wall time, and what the same runs would take one
per process (the pool).

Wall time: every TensorBoard event of every run, in time order; the gaps between consecutive events
count up to ``--gap`` seconds (longer ones are the sweep stopped: a session's end, a pause), so a
sweep resumed over several sessions gets the time it actually ran. The pool's estimate: each rlkit
run's time alone, from one seed of its (variant, env) trained alone for ``--measure-steps`` (its
eval cadence scaled along) and scaled to the full budget; a run the sweep ran alone (an SB3
baseline) counts its own recorded seconds; the runs then go to ``--workers`` workers longest first.
The packs' own recorded seconds, in the sweep's order on ``--workers`` workers, give its time where
its events are not all on this machine (a sweep restored from kept records); the pool is compared
with that. ``--envs`` keeps the runs of some envs only (every figure then counts those): the ones
that ran on this machine, where a sweep's packs ran on machines of different speeds.

    rlkit report walltime sweeps/outer_ppo_mujoco [--measure-steps 50000] [--envs Swimmer-v5,...]
"""

from __future__ import annotations

import heapq
import json
import math
import os
import platform
import shlex
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from rlkit.ablation.measurements import cpu_model
from rlkit.ablation.spec import expand
from rlkit.gym.config import TrainConfig
from rlkit.errors import ConfigError, RlkitError, one_line


def event_times(sweep: Path, names: set[str]) -> np.ndarray:
    """Wall times of every event of the sweep's runs named ``names``, sorted."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    files = [f for f in sweep.glob("runs/*/events.out.tfevents.*") if f.parent.name in names]
    times = [e.wall_time for f in files for e in EventFileLoader(str(f)).Load()]
    times = np.asarray(times, dtype=np.float64)
    return np.sort(times[times > 1e9])  # an event without a wall time (0) is left out


def active_seconds(times: np.ndarray, gap: float) -> tuple[float, int, float]:
    """Seconds the sweep ran (gaps up to ``gap`` summed), the number of longer gaps and their sum."""
    if len(times) < 2:
        return float("nan"), 0, 0.0
    d = np.diff(times)
    return float(d[d <= gap].sum()), int((d > gap).sum()), float(d[d > gap].sum())


def measure_config(config: dict, steps: int, logdir: str) -> TrainConfig:
    """One seed of ``config`` cut to ``steps``, its eval cadence scaled along (a run without periodic
    evaluations, ``eval_every`` 0, has none)."""
    full = int(config["total_steps"])
    every = int(config.get("eval_every", full))
    return TrainConfig.from_dict({**config, "total_steps": steps, "logdir": logdir, "run_name": "m",
                                  "eval_every": max(1, int(every * steps / full)) if every else 0,
                                  "checkpoint_every": steps, "progress": False, "torch_threads": 1})


def alone_seconds(config: dict, steps: int) -> float:
    """Seconds one seed of ``config`` takes alone for its full budget, from ``steps`` of it."""
    from rlkit.gym.trainer import train

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        train(measure_config(config, steps, tmp))
        return (time.perf_counter() - start) * int(config["total_steps"]) / steps


def recorded_seconds(runs: list, seconds: dict[str, float]) -> list[float]:
    """Each pack's (or lone run's) own recorded seconds, in the sweep's order: the members of a pack
    share its seconds in their status files, so a (variant, env)'s distinct values are its packs.
    A sweep restored from kept records (experiments/mujoco_recipes.sh) has these for every run but
    TensorBoard events only for the runs this machine ran."""
    groups: dict[tuple[str, str, str], set[float]] = {}
    for run in runs:
        key = (run.variant, run.env, run.name if run.kind != "rlkit" else "")
        groups.setdefault(key, set()).add(seconds[run.name])
    return [s for values in groups.values() for s in sorted(values)]


def in_order_seconds(durations: list[float], workers: int) -> float:
    """Wall time of ``durations`` on ``workers`` workers in the given order, each to the first free one."""
    free = [0.0] * workers
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def pool_seconds(durations: list[float], workers: int) -> float:
    """Wall time of ``durations`` on ``workers`` workers, longest first to the first free worker."""
    free = [0.0] * workers
    for d in sorted(durations, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def rlkit_only(mine: list, baselines: int, seconds: dict[str, float], measured: dict[tuple[str, str], float],
               workers: int) -> str:
    """The rlkit runs' share of the comparison: their packs' recorded seconds against their pool
    estimate, on the workers alone (the baselines run one per process in both)."""
    packs = in_order_seconds(recorded_seconds(mine, seconds), workers)
    pool = pool_seconds([measured[(run.variant, run.env)] for run in mine], workers)
    return (f"The {len(mine)} rlkit runs alone (the {baselines} baselines run one per process either way): packs' "
            f"recorded seconds {packs / 3600:.2f} h on the workers, pool estimate {pool / 3600:.2f} h, "
            f"{pool / packs:.2f}×.")


def read_sweep(sweep: Path) -> list:
    """The sweep's runs from its manifest; a folder that is not a sweep is a one-line :class:`ConfigError`."""
    try:
        manifest = json.loads((sweep / "manifest.json").read_text())
        return expand(manifest["spec"], str(sweep / "manifest.json"), manifest.get("budget")).runs
    except (OSError, ValueError, KeyError, TypeError, RlkitError) as exc:
        raise ConfigError(f"{sweep} is not a readable sweep folder ({type(exc).__name__}: {one_line(exc)})") from None


def finished(sweep: Path, runs: list) -> tuple[list, dict[str, float], list[str]]:
    """The runs whose status says done, their recorded seconds by name, and the names of the others
    (failed, unfinished, or with a missing or damaged status file: one whose seconds are not a
    positive finite number counts as damaged)."""
    done, seconds, left = [], {}, []
    for run in runs:
        try:
            status = json.loads((sweep / "status" / f"{run.name}.json").read_text())
            if status.get("status") != "done":
                raise ValueError(status.get("status"))
            value = status["seconds"]
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and 0 < value < float("inf")):
                raise ValueError(f"seconds {value!r}")
            seconds[run.name] = float(value)
            done.append(run)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            left.append(run.name)
    return done, seconds, left


def check_options(sweep: str | Path, runs: list, gap: float, measure_steps: int, workers: int,
                  envs: str | None) -> list[str]:
    """Refuse what the measurement cannot honour before it starts (one-line :class:`ConfigError`);
    the envs ``envs`` names (comma-separated; none: every env)."""
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    if not gap > 0 or not math.isfinite(gap):
        raise ConfigError(f"--gap must be a positive number of seconds, got {gap}")
    names = [] if envs is None else [e.strip() for e in envs.split(",")]
    if envs is not None and not all(names):
        raise ConfigError(f"--envs {envs!r}: an empty env name")
    unknown = sorted(set(names) - {run.env for run in runs})
    if unknown:
        raise ConfigError(f"--envs {', '.join(map(repr, unknown))}: not an env of {sweep}")
    if measure_steps < 0:
        raise ConfigError(f"--measure-steps must be 0 or more, got {measure_steps}")
    for run in runs if measure_steps else []:
        if run.kind == "rlkit":
            try:
                measure_config(run.config, measure_steps, tempfile.gettempdir())
            except RlkitError as exc:
                raise ConfigError(f"--measure-steps {measure_steps}: {one_line(exc)}") from None
    return names


def sweep_walltime(sweep_dir: str | Path, gap: float = 600.0, measure_steps: int = 50_000, workers: int = 2,
                   envs: str | None = None) -> list[str]:
    """A markdown section: the finished runs' wall time from their events (gaps over ``gap`` seconds
    left out), their packs' recorded seconds in the sweep's order on ``workers`` workers and, with
    ``measure_steps`` > 0, the pool's estimate from each (variant, env) trained alone for that many
    steps. ``envs`` (comma-separated) keeps those envs' runs only. Bad options, a folder that is not
    a sweep and a sweep with nothing finished are one-line :class:`ConfigError` errors, raised before
    anything is measured."""
    sweep = Path(sweep_dir)
    runs = read_sweep(sweep)
    names = check_options(sweep_dir, runs, gap, measure_steps, workers, envs)
    runs, seconds, left = finished(sweep, [run for run in runs if not names or run.env in names])
    if not runs:
        raise ConfigError(f"no finished run in {sweep_dir}" + (f" on {', '.join(names)}" if names else "")
                          + f" ({len(left)} failed, unfinished or with a damaged status file)")
    measured: dict[tuple[str, str], float] = {}
    durations = []
    for run in runs if measure_steps else []:
        if run.kind != "rlkit":
            durations.append(seconds[run.name])
            continue
        key = (run.variant, run.env)
        if key not in measured:
            measured[key] = alone_seconds(run.config, measure_steps)
        durations.append(measured[key])
    pool = pool_seconds(durations, workers) if durations else float("nan")
    command = (f"rlkit report walltime {shlex.quote(str(sweep_dir))} --measure-steps {measure_steps} --workers "
               f"{workers}" + (f" --envs {','.join(names)}" if names else ""))
    return _table(sweep, command, runs, seconds, left, gap, workers, measured, pool)


def _load() -> str:
    """The 5-minute load average as the table is written (a quiet machine measuring one run: about 1)."""
    return f"5-min load average {os.getloadavg()[1]:.2f} as written (a measurement running adds about 1)"


def _table(sweep: Path, command: str, runs: list, seconds: dict[str, float], left: list[str], gap: float,
           workers: int, measured: dict[tuple[str, str], float], pool: float) -> list[str]:
    """The section's lines (see :func:`sweep_walltime`)."""
    names = {run.name for run in runs}
    with_events = {f.parent.name for f in sweep.glob("runs/*/events.out.tfevents.*")} & names
    ran, stops, stopped = active_seconds(event_times(sweep, names), gap)
    packs = in_order_seconds(recorded_seconds(runs, seconds), workers)
    mine = [run for run in runs if run.kind == "rlkit"]
    split = ([rlkit_only(mine, len(runs) - len(mine), seconds, measured, workers)]
             if measured and len(mine) < len(runs) else [])
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    timed = not math.isnan(pool)
    pool_cells = f" {pool / 3600:.2f} | {pool / packs:.2f}× |" if timed else ""
    notes = [f"Left out, not finished or failed: {len(left)} runs ({', '.join(left[:5])}{', …' * (len(left) > 5)})."
             ] * bool(left) + [f"No TensorBoard events on this machine for {len(names) - len(with_events)} of the "
                               f"{len(names)} runs: 'sweep ran' counts the others only."] * (len(with_events) < len(names))
    return ([f"### Sweep wall time: {sweep.name} — {stamp}",
             f"Command: `{command}`  ",
             f"Machine: {platform.node()}, {cpu_model()}, "
             f"Python {platform.python_version()}, 1 torch thread, {_load()}", "",
             "| runs | sweep ran, from events (h) | stops left out (count, h) | packs' recorded seconds on the workers (h) |"
             + " pool estimate (h) | pool / packs |" * timed,
             "|---|---|---|---|" + "---|---|" * timed,
             f"| {len(runs)} | {ran / 3600:.2f} | {stops}, {stopped / 3600:.1f} | {packs / 3600:.2f} |{pool_cells}", ""]
            + ["Each (variant, env) alone: " + ", ".join(f"{v} {e} {s / 60:.1f} min" for (v, e), s in measured.items())
               + "."] * bool(measured) + split + notes)
