"""``rlkit sweep``: expand a spec, claim its directory, run what is not finished, write the tables."""

from __future__ import annotations

import json

import math
import os
import shlex
import signal
from dataclasses import dataclass
from pathlib import Path

from rlkit.ablation.packing import check_pack, pack_runs
from rlkit.ablation.results import LOCK, claim_sweep_dir, write_tables
from rlkit.ablation.runner import Progress, WorkerDied, run_local, run_ray, run_state
from rlkit.ablation.spec import RunSpec, SweepSpec, load_spec
from rlkit.core.encoders import make_encoder
from rlkit.errors import ConfigError
from rlkit.gym.envs import check_env_id, close_envs, env_gives_masks, make_env
from rlkit.io.lock import FolderLock
from rlkit.io.signals import interrupt_on


@dataclass(frozen=True)
class SweepSummary:
    sweep_dir: str
    total: int
    done: int
    failed: int
    missing: int
    ran: int
    """Runs started (or resumed) by this call."""

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


class SweepInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped a sweep: no further run started, the rlkit runs in flight checkpointed."""

    def __init__(self, command: str, baselines: bool = False) -> None:
        super().__init__(command)
        self.command = command
        """The command that continues the sweep."""
        self.baselines = baselines
        """Whether SB3 / sb3-contrib baselines were left to run: one in flight keeps no checkpoint and
        starts again from step 0."""


def plan(spec_path: str, out: str | None = None, budget: str | None = None
         ) -> tuple[SweepSpec, Path, list[tuple[RunSpec, str]]]:
    """The spec, its directory and every run with its state (:func:`run_state`)."""
    spec, sweep_dir = _checked(spec_path, out, budget)
    return spec, sweep_dir, [(run, run_state(sweep_dir, run)) for run in spec.runs]


def _checked(spec_path: str, out: str | None, budget: str | None) -> tuple[SweepSpec, Path]:
    """The spec and its directory; every env id is checked, an env with ``env_kwargs`` or a wrapper
    stack is made once with them (training side), and an existing sweep directory must accept the
    spec (as the real run checks it again under the lock), before anything is written."""
    if out is not None and not str(out).strip():
        raise ConfigError("--out must name a directory, got an empty path")
    spec = load_spec(spec_path, budget)
    # (env, kwargs, stack) -> a memory and an activation other than tanh that one of its rlkit runs uses
    made: dict[tuple[str, str, str], tuple[str, str]] = {}
    for run in spec.runs:
        key = (run.env, run.config.get("env_kwargs") or "", run.config.get("env_wrappers") or "")
        memory, activation = made.get(key, ("", "tanh"))
        if run.kind == "rlkit":
            memory = memory or run.config.get("memory") or ""
            activation = activation if activation != "tanh" else run.config.get("activation", "tanh")
        made[key] = (memory, activation)
    with interrupt_on(signal.SIGINT):  # a KeyboardInterrupt an env raises itself is then no Ctrl-C
        for (env, kwargs, stack), (memory, activation) in sorted(made.items()):
            check_env_id(env)
            if kwargs or stack or memory or activation != "tanh":  # what it cannot take fails here, not in each run
                _check_env(env, json.loads(kwargs or "{}"), stack, memory, activation)
    sweep_dir = Path(out or Path("sweeps") / (spec.name + ("-smoke" if budget else "")))
    if sweep_dir.exists() and not sweep_dir.is_dir():
        raise ConfigError(f"--out {sweep_dir} is a file, not a directory; choose another --out")
    claim_sweep_dir(sweep_dir, spec, budget, write=False)
    return spec, sweep_dir


def _check_env(env_id: str, kwargs: dict, stack: str, memory: str, activation: str = "tanh") -> None:
    """Make the env once as a run would (training side); refuse what the run itself would refuse
    (:meth:`rlkit.gym.agent.Agent.build`): a memory on an env that gives action masks, an activation
    other than tanh on images (a CNN's)."""
    env = make_env(env_id, kwargs, stack, training=True)
    try:
        if memory and env_gives_masks(env, env_id):
            raise ConfigError(f"memory = \"{memory}\" does not read action masks yet; {env_id} gives them")
        if activation != "tanh" and make_encoder(env.observation_space).image is not None:
            raise ConfigError(f"activation = \"{activation}\" sets the MLPs' activation; {env_id}'s images go "
                              "through a CNN, which keeps its ReLU")
    finally:
        close_envs(env, env_id)


def run_sweep(spec_path: str, out: str | None = None, workers: int | None = None, backend: str = "local",
              ray_address: str | None = None, budget: str | None = None, retry_failed: bool = False,
              gpus_per_run: float = 0.0, progress: bool = True, pack: int | str = "auto") -> SweepSummary:
    """Run every unfinished run of the spec (see :mod:`rlkit.ablation.runner`), the seeds of a
    (variant, env) packed into populations (``pack``: see :mod:`rlkit.ablation.packing`); returns
    the counts."""
    check_sweep_flags(workers, backend, gpus_per_run)
    size = check_pack(pack)
    if workers is None:
        workers = min(len(os_cpus()), 64)
    spec, sweep_dir = _checked(spec_path, out, budget)
    with sweep_lock(sweep_dir):
        claim_sweep_dir(sweep_dir, spec, budget)
        states = [(run, run_state(sweep_dir, run)) for run in spec.runs]
        todo = [run for run, state in states
                if state in ("new", "partial", "restart") or (retry_failed and state == "failed")]
        bar = Progress(len(todo), spec.name, progress)
        try:
            with interrupt_on(signal.SIGINT):  # the pack check makes envs (see _checked)
                items = pack_runs(todo, sweep_dir / "runs", size, workers) if todo else []
            if items and backend == "local":
                run_local(items, sweep_dir, min(workers, len(items)), bar)
            elif items:
                run_ray(items, sweep_dir, workers, ray_address, gpus_per_run, bar)
        except (KeyboardInterrupt, WorkerDied) as exc:
            again = [spec_path, *(["--out", out] if out else []), *(["--budget", budget] if budget else []),
                     *(["--pack", str(pack)] if pack != "auto" else [])]
            if isinstance(exc, WorkerDied):
                raise WorkerDied(f"{exc}; resume with: rlkit sweep {shlex.join(again)}") from None
            raise SweepInterrupted("rlkit sweep " + shlex.join(again),
                                   baselines=any(run.kind != "rlkit" for run in todo)) from None
        finally:
            bar.close()
            done, failed, missing = write_tables(sweep_dir, spec)
    return SweepSummary(str(sweep_dir), len(states), done, failed, missing, len(todo))


def check_sweep_flags(workers: int | None, backend: str, gpus_per_run: float) -> None:
    """One-line :class:`ConfigError` for flags no sweep can honour (checked by ``--dry-run`` too)."""
    if backend not in ("local", "ray"):
        raise ConfigError(f"--backend must be local or ray, got {backend!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers <= 0):
        raise ConfigError(f"--workers must be a positive number of processes, got {workers!r}")
    if not (isinstance(gpus_per_run, (int, float)) and math.isfinite(gpus_per_run) and gpus_per_run >= 0):
        raise ConfigError(f"--gpus-per-run must be a finite number >= 0, got {gpus_per_run!r}")
    if gpus_per_run and backend != "ray":
        raise ConfigError("--gpus-per-run applies to --backend ray (a local sweep uses each run's --device)")


def sweep_lock(sweep_dir: Path) -> FolderLock:
    """Hold the sweep directory for this process (a context manager): a second ``rlkit sweep`` into
    the same directory is refused in one line while this one runs (see :class:`FolderLock`)."""
    try:
        sweep_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot use {sweep_dir} as a sweep directory: {exc.strerror or exc}") from None
    return FolderLock(sweep_dir, LOCK, "rlkit sweep", "run this command again")


def os_cpus() -> list[int]:
    return list(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
