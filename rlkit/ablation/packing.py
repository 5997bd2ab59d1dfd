"""Packing a sweep's seeds into populations (:mod:`rlkit.gym.population`): the runs of one
(variant, env) that differ only in their seed train in one process as one batched network.

``--pack auto`` (the default) packs each (variant, env)'s seeds together, split into as many packs
as there are workers to a group where the groups are fewer than the workers; ``--pack K`` packs at
most K; ``--pack 1`` runs every run alone. A pack takes only what a population can train (PPO,
Outer-PPO and HP3O on vector observations: an image env or a baseline runs alone) and never a
run that started alone: it resumes alone, since a population's numbers are not a single run's (a
member's are its own whatever the pack, on the CPU, so a member resumes in any pack, or alone).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rlkit.ablation.spec import RunSpec
from rlkit.errors import ConfigError, RlkitError

Item = RunSpec | list[RunSpec]
"""What a worker executes: one run alone, or a pack of runs as one population."""


def check_pack(pack: Any) -> int | None:
    """``--pack``: ``auto`` (None) or a positive number of runs per pack; else a one-line error."""
    if pack == "auto":
        return None
    try:
        size = int(pack) if not isinstance(pack, (bool, float)) else None
    except (TypeError, ValueError):
        size = None
    if size is None or size < 1 or str(pack).strip() != str(size):
        raise ConfigError(f"--pack must be auto or a positive number of runs per process, got {pack!r}")
    return size


def _packable(config: dict[str, Any]) -> bool:
    """Whether a population trains this config (vector observations, no masks)."""
    from rlkit.gym.config import TrainConfig
    from rlkit.gym.population_start import check_population

    try:
        check_population(TrainConfig.from_dict({**config, "resume": None}))
    except RlkitError:
        return False
    return True


def _started_alone(run_dir: Path) -> bool:
    """A run directory with something written (more than its lock) by a run that trained alone."""
    from rlkit.gym.population_start import is_member
    from rlkit.io.lock import RUN_LOCK

    return run_dir.is_dir() and any(p.name != RUN_LOCK for p in run_dir.iterdir()) and not is_member(run_dir)


def pack_runs(todo: list[RunSpec], runs_dir: Path, pack: int | None, workers: int) -> list[Item]:
    """The runs to execute, in order: packs (lists) of the runs that train together, single runs."""
    if pack == 1:
        return list(todo)
    groups: dict[str, list[RunSpec]] = {}
    alone: list[Item] = []
    for run in todo:
        if run.kind != "rlkit" or _started_alone(runs_dir / run.name):
            alone.append(run)
            continue
        key = json.dumps({k: v for k, v in run.config.items() if k not in ("seed", "run_name", "resume")},
                         sort_keys=True, default=str)
        groups.setdefault(key, []).append(run)
    packable = {key: runs for key, runs in groups.items() if len(runs) > 1 and _packable(runs[0].config)}
    alone.extend(run for key, runs in groups.items() if key not in packable for run in runs)
    per_group = max(1, workers // max(1, len(packable)))
    packs: list[Item] = []
    for runs in packable.values():
        size = pack or math.ceil(len(runs) / min(per_group, len(runs)))
        chunks = [runs[i:i + size] for i in range(0, len(runs), size)]
        packs.extend(chunk if len(chunk) > 1 else chunk[0] for chunk in chunks)
    return packs + alone
