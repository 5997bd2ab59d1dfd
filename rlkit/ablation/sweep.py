"""``rlkit sweep``: expand a spec, claim its directory, run what is not finished, write the tables."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from rlkit.ablation.results import claim_sweep_dir, write_tables
from rlkit.ablation.runner import Progress, run_local, run_ray, run_state
from rlkit.ablation.spec import load_spec
from rlkit.errors import ConfigError


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


def plan(spec_path: str, out: str | None = None, budget: str | None = None
         ) -> tuple[object, Path, list[tuple[object, str]]]:
    """The spec, its directory and every run with its state (``done``, ``failed``, ``partial``, ``new``)."""
    spec = load_spec(spec_path, budget)
    sweep_dir = Path(out or Path("sweeps") / (spec.name + ("-smoke" if budget else "")))
    states = [(run, run_state(sweep_dir, run)) for run in spec.runs]
    return spec, sweep_dir, states


def run_sweep(spec_path: str, out: str | None = None, workers: int | None = None, backend: str = "local",
              ray_address: str | None = None, budget: str | None = None, retry_failed: bool = False,
              gpus_per_run: float = 0.0, progress: bool = True) -> SweepSummary:
    """Run every unfinished run of the spec (see :mod:`rlkit.ablation.runner`); returns the counts."""
    if backend not in ("local", "ray"):
        raise ConfigError(f"--backend must be local or ray, got {backend!r}")
    workers = workers or min(len(os_cpus()), 64)
    if workers <= 0:
        raise ConfigError(f"--workers must be positive, got {workers}")
    spec, sweep_dir, states = plan(spec_path, out, budget)
    claim_sweep_dir(sweep_dir, spec, budget)  # type: ignore[arg-type]
    todo = [run for run, state in states if state in ("new", "partial") or (retry_failed and state == "failed")]
    bar = Progress(len(todo), spec.name, progress and sys.stderr.isatty())  # type: ignore[attr-defined]
    try:
        if todo and backend == "local":
            run_local(todo, sweep_dir, min(workers, len(todo)), bar)
        elif todo:
            run_ray(todo, sweep_dir, workers, ray_address, gpus_per_run, bar)
    finally:
        bar.close()
        done, failed, missing = write_tables(sweep_dir, spec)  # type: ignore[arg-type]
    return SweepSummary(str(sweep_dir), len(states), done, failed, missing, len(todo))


def os_cpus() -> list[int]:
    import os

    return list(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
