"""Running the CLI as a user would: a separate process, its exit code and its stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests import warm_cli

ROOT = Path(__file__).parents[2]
CLI = "import sys, tests.toy_envs, rlkit_launch; sys.exit(rlkit_launch.main())"
"""The ``rlkit`` command as installed (its entry point is rlkit_launch), with the toy envs registered."""
SMALL = ["--num-envs", "2", "--num-steps", "64", "--num-minibatches", "2", "--update-epochs", "1",
         "--eval-episodes", "1", "--total-steps", "1024"]


def logged_steps(run_dir: Path | str, tag: str = "charts/learning_rate") -> list[int]:
    """The steps of ``tag``'s scalars in a run's TensorBoard events (one per update for the default
    tag), as TensorBoard reads them; a file still being written reads to its last whole record."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-c", CLI, *args]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``rlkit ARGS`` run to its end as a fresh process (forked warm where it can be: tests/warm_cli.py)."""
    warm = warm_cli.run(list(args), ROOT, timeout)
    if warm is not None:
        return warm
    return subprocess.run(cli_command(*args), cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def start_cli(*args: str, env: dict | None = None) -> "subprocess.Popen | warm_cli.WarmProcess":
    """``rlkit ARGS`` started as a fresh process in a session of its own, its stdout and stderr
    read by ``communicate()`` (forked warm where it can be: tests/warm_cli.py)."""
    warm = warm_cli.popen(list(args), env)
    if warm is not None:
        return warm
    return subprocess.Popen(cli_command(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)


def error_line(proc: subprocess.CompletedProcess) -> str:
    """The process failed as rlkit promises: exit 2, its last stderr line ``rlkit: error: ...``, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("rlkit: error: "), proc.stderr[-2000:]
    return line


def last_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
