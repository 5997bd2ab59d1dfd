"""Running a sweep: every run of a :class:`SweepSpec` in a pool of worker processes (or as Ray
tasks), resumable, with each run's output in its own log file.

Layout of a sweep directory::

    manifest.json        the spec, its budget, the git commit and package versions
    runs/<run>/          each run's TensorBoard events, checkpoints and result.json
    logs/<run>.log       each run's own output
    status/<run>.json    a failed run's one-line error
    results.csv          one row per evaluation; runs.csv: one row per run (see results.py)

Running the same command again skips finished runs, resumes interrupted ones from their
checkpoints (bit-identical to uninterrupted runs) and restarts runs that never checkpointed.
A failed run is recorded, reported and skipped until ``--retry-failed``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterator

from rlkit.ablation.packing import Item, PackMember, train_pack
from rlkit.ablation.reaper import start_reaper, stop_reaper
from rlkit.ablation.registry import register_missing, sweep_env_specs
from rlkit.ablation.results import read_result, read_status
from rlkit.ablation.spec import RunSpec
from rlkit.errors import ConfigError, RlkitError, one_line
from rlkit.io.checkpoint import discard_unused, newest_checkpoint_steps
from rlkit.io.files import write_json
from rlkit.io.process import CHECK_SECONDS, die_with_owner
from rlkit.io.progress import progress_bar, thread_lock_only
from rlkit.io.signals import interrupt_on

Outcome = dict[str, Any]
"""``{"name", "status": "done" | "failed" | "interrupted", "error", "result"}`` of one run."""


def run_state(sweep_dir: Path, run: RunSpec) -> str:
    """``done``, ``failed``, ``extended`` (finished past the spec's budget, by hand: never run
    again, nothing overwritten), ``partial`` (started, not finished: it resumes from its newest
    checkpoint), ``restart`` (an SB3 or sb3-contrib baseline started, not finished: it keeps no
    checkpoints and starts again from step 0) or ``new``."""
    run_dir = sweep_dir / "runs" / run.name
    result, _ = read_result(run_dir, run)  # damaged or of another shape: not finished, it resumes
    if result is not None:
        return "extended" if run.past_budget(result, newest_checkpoint_steps(run_dir)) else "done"
    status = read_status(sweep_dir, run) or {}
    if status.get("status") == "failed":
        return "failed"
    if not run_dir.exists():
        return "new"
    return "partial" if run.kind == "rlkit" else "restart"


@contextlib.contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """File descriptors 1 and 2 (Python's and any library's output) go to ``path`` meanwhile."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "a") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def execute(run: RunSpec, sweep_dir: str) -> Outcome:
    """Run (or resume) one run in this process; its output goes to ``logs/<run>.log``."""
    root = Path(sweep_dir)
    run_dir = root / "runs" / run.name
    status = root / "status" / f"{run.name}.json"
    if _STOPPING is not None and _STOPPING.value:  # queued before the sweep was stopped
        return {"name": run.name, "status": "interrupted", "error": None, "result": None}
    start = time.perf_counter()
    with _IN_RUN:  # until its status is written: an abandoned worker exits between runs only
        with _output_to(root / "logs" / f"{run.name}.log"), interrupt_on(signal.SIGINT):
            try:
                result = _train(run, run_dir)
            except KeyboardInterrupt:  # the sweep is stopping: the run resumes next time from its checkpoint
                return {"name": run.name, "status": "interrupted", "error": None, "result": None}
            except (RlkitError, Exception) as exc:  # noqa: BLE001  (any failure is recorded, not raised)
                error = str(exc) if isinstance(exc, RlkitError) else f"{type(exc).__name__}: {one_line(exc)}"
                write_json(status, {"status": "failed", "error": error})
                return {"name": run.name, "status": "failed", "error": error, "result": None}
        seconds = time.perf_counter() - start  # in the worker: env creation, training, evaluation, files
        write_json(status, {"status": "done", "seconds": seconds})
    return {"name": run.name, "status": "done", "error": None, "result": result}


def execute_pack(runs: list[RunSpec], sweep_dir: str) -> list[Outcome]:
    """Run (or resume) a pack of runs as one population (see :mod:`rlkit.ablation.packing`) in this
    process; its output goes to the first run's log, the others' logs say so. A member that fails
    is recorded as failed, the others go on."""
    root = Path(sweep_dir)
    if _STOPPING is not None and _STOPPING.value:
        return [{"name": run.name, "status": "interrupted", "error": None, "result": None} for run in runs]
    first = root / "logs" / f"{runs[0].name}.log"
    for run in runs[1:]:
        with open(root / "logs" / f"{run.name}.log", "a") as log:
            log.write(f"trained in one process with {', '.join(r.name for r in runs if r is not run)}: "
                      f"the output is in {first.name}\n")
    start = time.perf_counter()
    with _IN_RUN:  # until the statuses are written (see execute)
        with _output_to(first), interrupt_on(signal.SIGINT):
            try:
                members = train_pack(runs, root / "runs")
            except KeyboardInterrupt:
                return [{"name": run.name, "status": "interrupted", "error": None, "result": None} for run in runs]
            except (RlkitError, Exception) as exc:  # noqa: BLE001  (any failure is recorded, not raised)
                error = str(exc) if isinstance(exc, RlkitError) else f"{type(exc).__name__}: {one_line(exc)}"
                members = {run.name: PackMember(None, error, []) for run in runs}
        seconds = time.perf_counter() - start
        outcomes = []
        for run in runs:
            member = members.get(run.name, PackMember(None, "not trained by its pack", []))
            status = "done" if member.result is not None else "failed"
            write_json(root / "status" / f"{run.name}.json", {"status": status, "seconds": seconds, "pack": member.pack}
                       if member.result is not None else {"status": status, "error": member.error})
            outcomes.append({"name": run.name, "status": status, "error": member.error, "result": member.result})
    return outcomes


def _train(run: RunSpec, run_dir: Path) -> dict[str, Any]:
    from rlkit.gym.config import TrainConfig
    from rlkit.gym.population import is_member, resume_population
    from rlkit.gym.trainer import resume, train

    cfg = {**run.config, "logdir": str(run_dir.parent), "run_name": run.name, "resume": None, "progress": False,
           "torch_threads": 1, "hparams": list(run.hparams)}
    if run.kind != "rlkit":
        from rlkit.ablation.baselines import train_baseline

        run_dir.mkdir(exist_ok=True)
        return train_baseline(run.kind, cfg, run_dir)
    if run_dir.exists():
        discard_unused(run_dir)  # created (its lock at most), nothing written yet: it starts anew
    if run_dir.exists() and is_member(run_dir):  # packed before: alone it is a population of one
        (member,) = resume_population([run_dir])
        if member.result is None:
            raise RlkitError(member.error or "failed")
        return member.result.to_json()
    if run_dir.exists():
        return resume(str(run_dir)).to_json()
    return train(TrainConfig.from_dict(cfg)).to_json()


def _one_thread() -> None:
    """One torch thread and one BLAS thread per run: runs side by side on the cores. (OpenBLAS's
    default threads spin-wait, so runs side by side would slow each other down; with one BLAS
    thread each, each runs as fast as alone.)"""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)


_STOPPING: Any = None
"""In a pool worker: the sweep's "stopping" flag (set before it signals the runs in flight). The
sweep's flags are lock-free shared bytes: a worker killed while holding a multiprocessing lock
(an ``Event``'s) would block the sweep's next ``set()`` for ever."""
_IN_RUN = threading.Lock()
"""In a pool worker: held while a run (or a pack) trains."""


def _init_worker(stopping: Any = None, abandoned: Any = None, env_specs: Any = ()) -> None:
    """Pool workers: one thread (see :func:`_one_thread`), the sweep's own env registrations
    (spawned workers lack them), die with the sweep (so a re-run never races an orphan), and a
    session of their own: a terminal's Ctrl-C reaches the sweep process alone, which passes one
    SIGINT to each run in flight (see :func:`run_local`). Once the pool is ``abandoned`` (a shared
    flag: another worker died), a worker exits as soon as its run in flight has stopped."""
    global _STOPPING
    _STOPPING = stopping
    register_missing(list(env_specs))
    _one_thread()
    thread_lock_only()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the sweep's handler a forked worker inherits
    with contextlib.suppress(OSError):
        os.setsid()
    die_with_owner()
    if abandoned is not None:
        threading.Thread(target=_exit_when_abandoned, args=(abandoned,), name="rlkit-abandoned", daemon=True).start()


def _exit_when_abandoned(abandoned: Any) -> None:
    """A broken pool's executor terminates its workers (SIGTERM: a run stops after its update in
    flight, or at once on a second) but from Python 3.12 on sends them no "exit" item: a worker
    whose run has stopped would wait for the next one for ever, and the sweep with it."""
    while not abandoned.value:  # looked at as often as die_with_owner looks at the sweep
        time.sleep(CHECK_SECONDS)
    _IN_RUN.acquire()  # the run in flight, if any, has stopped (interrupted: it resumes from its checkpoint)
    os._exit(1)


def cuda_in_reach() -> bool:
    """Whether this process has CUDA or could: a CUDA build of torch and a GPU. Once a process has
    asked the CUDA driver anything (``torch.cuda.is_available()`` included), a forked child of it
    cannot use CUDA, so a forked worker's runs on ``--device auto`` would all fail on a GPU."""
    import torch

    return torch.cuda.is_initialized() or (torch.version.cuda is not None and torch.cuda.is_available())


def pool_context() -> Any:
    """How the pool's workers start: forked (at once) where CUDA is out of reach (a CPU build of
    torch, or no GPU), else spawned (each worker imports rlkit anew, a second or two)."""
    if cuda_in_reach():
        return multiprocessing.get_context("spawn")
    return multiprocessing.get_context()


def run_local(runs: list[Item], sweep_dir: Path, workers: int, done: Callable[[Outcome], None]) -> None:
    """The runs (single runs and packs) in a pool of ``workers`` processes (each reused across
    runs). SIGINT or SIGTERM to the sweep (its own pid, or its process group) starts no further run
    and passes SIGINT to the runs in flight, which checkpoint after their current update and stop;
    then KeyboardInterrupt."""
    context = pool_context()
    stopping, abandoned = context.RawValue("b", 0), context.RawValue("b", 0)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_worker,
                               initargs=(stopping, abandoned, sweep_env_specs(runs)))
    try:
        with interrupt_on(signal.SIGINT, signal.SIGTERM):
            pending = {pool.submit(execute_pack if isinstance(item, list) else execute, item, str(sweep_dir))
                       for item in runs}
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    outcome = future.result()
                    for one in outcome if isinstance(outcome, list) else [outcome]:
                        done(one)
    except KeyboardInterrupt:
        stopping.value = 1
        if _stop_in_flight(pool, abandoned):
            raise _worker_died() from None
        raise
    except BrokenProcessPool:  # the pool's other workers are stopped with it and exit (no queued run starts)
        abandoned.value = 1
        stopping.value = 1
        raise _worker_died() from None
    pool.shutdown()


def _worker_died() -> WorkerDied:
    return WorkerDied("a sweep worker process died (killed, or out of memory): the runs in flight stopped "
                      "with it, those finished are recorded")


class WorkerDied(RlkitError):
    """A pool worker died under a run (SIGKILL, the OOM killer); the sweep stops, resumable."""


def _stop_in_flight(pool: ProcessPoolExecutor, abandoned: Any) -> bool:
    """Cancel the queued runs, ask the running ones to checkpoint and stop, and wait for them.
    Whether a worker died meanwhile (the pool broke: its workers are then told to exit once their
    runs have stopped, see :func:`_exit_when_abandoned`)."""
    processes = list(getattr(pool, "_processes", {}).values())  # the executor's worker processes
    pool.shutdown(wait=False, cancel_futures=True)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while they finish is ignored
    try:
        for process in processes:
            with contextlib.suppress(ProcessLookupError, OSError, ValueError):
                os.kill(process.pid, signal.SIGINT)
        for process in processes:
            while process.is_alive():
                process.join(0.1)
                if getattr(pool, "_broken", False):  # set by the executor once a worker has died
                    abandoned.value = 1
    finally:
        signal.signal(signal.SIGINT, previous)
    return bool(getattr(pool, "_broken", False))


def run_ray(runs: list[Item], sweep_dir: Path, workers: int, address: str | None, gpus_per_run: float,
            done: Callable[[Outcome], None]) -> None:
    """The runs as Ray tasks (1 CPU each, or a GPU share) on a local Ray instance or ``address``.
    Runs write to ``sweep_dir``, which the Ray workers must see (a shared filesystem)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--backend ray needs the optional extra: pip install 'rlkit[ray]'") from None
    started = not ray.is_initialized()
    reaper = start_reaper() if started and address is None and os.name == "posix" else None
    try:
        if started:
            ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        task = ray.remote(num_cpus=1, num_gpus=gpus_per_run)(_ray_execute)
        pending = [task.remote([asdict(r) for r in item] if isinstance(item, list) else asdict(item), str(sweep_dir),
                               sweep_env_specs([item])) for item in runs]
        while pending:
            finished, pending = ray.wait(pending, num_returns=1)
            outcome = ray.get(finished[0])
            for one in outcome if isinstance(outcome, list) else [outcome]:
                done(one)
    finally:
        if started:
            ray.shutdown()
        if reaper is not None:
            stop_reaper(reaper)


def _ray_execute(run: dict[str, Any] | list[dict[str, Any]], sweep_dir: str,
                 env_specs: Any = ()) -> Outcome | list[Outcome]:
    _one_thread()
    register_missing(list(env_specs))
    if isinstance(run, list):
        return execute_pack([RunSpec(**r) for r in run], sweep_dir)
    return execute(RunSpec(**run), sweep_dir)


class Progress:
    """One bar for the sweep (on a terminal, when ``show``): runs done, env steps per second, ETA, failures."""

    def __init__(self, total: int, name: str, show: bool) -> None:
        self.bar = progress_bar(total, "run", show, name)
        self.start, self.steps, self.failed = time.perf_counter(), 0, 0

    def __call__(self, outcome: Outcome) -> None:
        if outcome["status"] == "done":
            self.steps += int(outcome["result"].get("total_steps") or 0)
        elif outcome["status"] == "failed":
            self.failed += 1
        elapsed = time.perf_counter() - self.start
        self.bar.set_postfix_str(f"{self.steps / elapsed:,.0f} steps/s, {self.failed} failed", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
