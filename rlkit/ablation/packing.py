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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlkit.ablation.spec import RunSpec
from rlkit.errors import ConfigError, RlkitError
from rlkit.io.checkpoint import discard_unused, newest_checkpoint_steps

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
    from rlkit.gym.population import check_population

    try:
        check_population(TrainConfig.from_dict({**config, "resume": None}))
    except RlkitError:
        return False
    return True


def _started_alone(run_dir: Path) -> bool:
    """A run directory with something written (more than its lock) by a run that trained alone."""
    from rlkit.gym.population import is_member
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


@dataclass(frozen=True)
class PackMember:
    """How one run of a pack ended."""

    result: dict[str, Any] | None
    """Its ``result.json`` (None if it failed)."""
    error: str | None
    """Its one-line error (None if it finished)."""
    pack: list[str]
    """The runs it trained with in one population, itself included (its status file keeps them:
    runs.csv divides the pack's seconds among them)."""


def train_pack(runs: list[RunSpec], runs_dir: Path) -> dict[str, PackMember]:
    """The pack's runs: new ones as one population, started ones (members of earlier packs)
    resumed together where their newest checkpoints are at the same step. Run name -> how it ended."""
    from rlkit.gym.config import TrainConfig
    from rlkit.gym.population import resume_population, train_population

    new, started = [], {}
    for run in runs:
        run_dir = runs_dir / run.name
        if run_dir.exists():
            discard_unused(run_dir)  # created (its lock at most), nothing written yet: it starts anew
        if run_dir.exists():
            started.setdefault(newest_checkpoint_steps(run_dir) or 0, []).append(run_dir)
        else:
            new.append(run)
    populations = [resume_population(dirs) for dirs in started.values()]
    if new:
        cfg = TrainConfig.from_dict({**new[0].config, "logdir": str(runs_dir), "run_name": None, "resume": None,
                                     "progress": False, "torch_threads": 1, "hparams": list(new[0].hparams)})
        populations.append(train_population(cfg, [r.seed for r in new], [r.name for r in new]))
    out = {}
    for outcomes in populations:
        names = [Path(o.run_dir).name for o in outcomes]
        out.update({name: PackMember(o.result.to_json() if o.result else None, o.error, names)
                    for name, o in zip(names, outcomes)})
    return out
