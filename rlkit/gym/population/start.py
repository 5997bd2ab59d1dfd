"""Starting a population (:mod:`rlkit.gym.population`): its seeds and members checked before
anything is written, new members built (or killed ones resumed), and nothing left behind when the
start-up fails.

Every new member's run directory gets ``population.json`` (the population's seeds and run
directories), so a resume of one member alone continues it as a population of one, with the
numbers it has among the others.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch

from rlkit.core.encoders import make_encoder
from rlkit.errors import ConfigError
from rlkit.gym.checkpoint import trained_in_population
from rlkit.gym.config import TrainConfig
from rlkit.gym.envs import close_envs, env_gives_masks, make_env
from rlkit.gym.population.engine import MemberOutcome, Population
from rlkit.gym.trainer import PPOTrainer
from rlkit.io.checkpoint import POPULATION_MARKER as MARKER
from rlkit.io.checkpoint import check_run_name, run_dir_of
from rlkit.io.files import write_json

MAX_MEMBERS = 4096
"""The most members one population takes (each is a run directory and its envs)."""


def population_seeds(seeds: Any) -> list[int]:
    """``seeds`` (any iterable of integers, numpy's included) as a list of distinct ints; anything
    else is a one-line :class:`ConfigError`."""
    if isinstance(seeds, (str, bytes, int, np.integer)) or not isinstance(seeds, Iterable):
        raise ConfigError(f"seeds must be a list of integer seeds, got {type(seeds).__name__} {seeds!r}")
    out = []
    for s in seeds:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
            raise ConfigError(f"seeds must be integers, got {s!r} ({type(s).__name__})")
        out.append(int(s))
    if not out or len(out) > MAX_MEMBERS:
        raise ConfigError(f"a population has 1 to {MAX_MEMBERS} members, got {len(out)} seeds")
    twice = sorted(s for s, n in Counter(out).items() if n > 1)
    if twice:
        raise ConfigError(f"seeds given twice: {twice} (each member is its own run)")
    return out


def check_population(cfg: TrainConfig) -> None:
    """A one-line :class:`ConfigError` for settings a population cannot train."""
    if cfg.resume:
        raise ConfigError("a population resumes with resume_population(run_dirs) (rlkit train --resume DIR DIR ...)")
    if cfg.memory:
        raise ConfigError(f"a population trains feed-forward policies; --memory {cfg.memory} needs one seed per process")
    if cfg.activation != "tanh":
        raise ConfigError(f"a population's stacked MLPs compute tanh layers; --activation {cfg.activation} needs one "
                          "seed per process")
    env = make_env(cfg.env, cfg.env_options, cfg.env_wrappers)
    try:
        if make_encoder(env.observation_space).image is not None:
            raise ConfigError(f"a population trains MLP policies; {cfg.env}'s images need one seed per process")
        if env_gives_masks(env, cfg.env):
            raise ConfigError(f"a population does not act with action masks yet; {cfg.env} gives them")
    finally:
        close_envs(env, cfg.env, abort=True)  # a close() that raises: the members' own envs warn of it once


def member_configs(cfg: TrainConfig, seeds: list[int], run_names: list[str] | None = None) -> list[TrainConfig]:
    """One config per seed (run name ``run_names[i]``, or ``{run_name}__s{seed}``), each checked,
    and no named member's directory taken: refused before any is made."""
    if run_names is not None and (isinstance(run_names, (str, bytes)) or not isinstance(run_names, (list, tuple))
                                  or not all(isinstance(n, str) for n in run_names)):
        raise ConfigError(f"run_names must be a list of names, got {run_names!r}")
    if run_names is not None and len(run_names) != len(seeds):
        raise ConfigError(f"{len(run_names)} run names for {len(seeds)} seeds")
    names = run_names or [f"{cfg.run_name}__s{s}" if cfg.run_name else None for s in seeds]
    if run_names is not None and len(set(run_names)) != len(run_names):
        raise ConfigError(f"run names given twice: {sorted(n for n in set(run_names) if run_names.count(n) > 1)}")
    configs = [cfg.replace(seed=s, run_name=name) for s, name in zip(seeds, names)]
    for c in configs:
        c.validate()
        if c.run_name is not None:
            check_run_name(c.run_name)
            if (Path(c.logdir) / c.run_name).exists():
                raise ConfigError(f"run directory {str(Path(c.logdir) / c.run_name)!r} already exists; "
                                  "choose another --run-name")
    return configs


def train_population(cfg: TrainConfig, seeds: Iterable[int], run_names: list[str] | None = None
                     ) -> list[MemberOutcome]:
    """Train ``cfg`` once per seed as one population; each member's run directory is
    ``run_names[i]`` (a sweep's names) or ``{run_name}__s{seed}`` under ``cfg.logdir`` (or the
    single run's default name)."""
    if not isinstance(cfg, TrainConfig):
        raise ConfigError(f"cfg must be a TrainConfig (rlkit.preset(...) or TrainConfig(...)), got {type(cfg).__name__}")
    seeds = population_seeds(seeds)
    cfg.validate()
    check_population(cfg)
    configs = member_configs(cfg, seeds, run_names)
    members, rng_states = _build(lambda c: PPOTrainer(c, in_process_envs=len(configs) > 1), configs)
    population = _population(members, rng_states)
    dirs = [str(m.run_dir) for m in members]
    for m in members:
        write_json(m.run_dir / MARKER, {"seeds": seeds, "run_dirs": dirs})
    return population.train()


def resume_population(run_dirs: Iterable[str | Path], **changes: object) -> list[MemberOutcome]:
    """Continue the members of a population (their run directories) from their newest checkpoints,
    together; ``changes`` as :func:`rlkit.gym.trainer.resume` takes them (``total_steps``)."""
    if isinstance(run_dirs, (str, bytes, Path)) or not isinstance(run_dirs, Iterable):
        raise ConfigError(f"run_dirs must be a list of run directories, got {type(run_dirs).__name__}")
    dirs = [str(d) for d in run_dirs]
    if not dirs or len(dirs) > MAX_MEMBERS:
        raise ConfigError(f"a population has 1 to {MAX_MEMBERS} members, got {len(dirs)} run directories")
    twice = sorted(str(d) for d, n in Counter(run_dir_of(d) for d in dirs).items() if n > 1)
    if twice:
        raise ConfigError(f"the same run directory given twice: {', '.join(twice)}")
    members, rng_states = _build(lambda d: PPOTrainer(TrainConfig(resume=d), dict(changes), len(dirs) > 1), dirs)
    try:
        _check_resumed(members)
    except BaseException:
        for m in members:
            m.discard()
        raise
    return _population(members, rng_states).train()


def _build(make: Any, items: list[Any]) -> tuple[list[PPOTrainer], list[torch.Tensor]]:
    """Members made one by one, with each one's torch random state right after it is made; if one
    fails, those made before are closed, released and (new ones) removed."""
    members: list[PPOTrainer] = []
    rng_states = []
    try:
        for item in items:
            members.append(make(item))
            rng_states.append(torch.get_rng_state())
    except BaseException:
        for m in members:
            m.discard()
        raise
    return members, rng_states


def _population(members: list[PPOTrainer], rng_states: list[torch.Tensor]) -> Population:
    """The members as one population; if that fails (its shared envs), they are given up."""
    try:
        return Population(members, rng_states)
    except BaseException:
        for m in members:
            m.discard()
        raise


def _check_resumed(members: list[PPOTrainer]) -> None:
    """Resumed members must be one population: the same settings but the seed (and what their
    hparams show: members of a sweep extended between their starts show more), at the same update."""
    def settings(m: PPOTrainer) -> dict[str, Any]:
        return {k: v for k, v in m.cfg.to_dict().items() if k not in ("seed", "run_name", "resume", "hparams")}

    first = settings(members[0])
    for m in members[1:]:
        other = settings(m)
        differ = sorted(k for k in first if first[k] != other.get(k))
        if differ:
            raise ConfigError(f"{m.run_dir} is not of the same population as {members[0].run_dir}: "
                              f"{', '.join(differ)} differ")
    check_population(members[0].cfg.replace(resume=None))
    updates = sorted({m.progress.updates_done for m in members})
    if len(updates) > 1:
        raise ConfigError(f"the members' newest checkpoints are at different updates ({updates}); resume them "
                          "one by one (rlkit train --resume DIR, each a population of one)")


def is_member(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` (or a checkpoint in it) was trained as a member of a population: its
    ``population.json`` or, where that is lost, its checkpoints say so."""
    try:
        return trained_in_population(run_dir)
    except Exception:  # noqa: BLE001  (not a readable path: the caller's own resume reports it)
        return False
