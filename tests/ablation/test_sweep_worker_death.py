"""A pool worker killed under a run (SIGKILL, the OOM killer): the sweep stops in one line that
says how to resume, leaves no process behind, and the same command finishes the rest."""

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ablation.test_hostile_sweeps import BASE, ROOT, SLOW, spec_file
from tests.processes import children, signal_set, wait_gone, wait_until

LONG_UPDATES = {**BASE, "seeds": 2, "total_steps": 400_000, "num_envs": 4, "num_steps": 2048, "update_epochs": 10,
                "checkpoint_every": 8192, "eval_every": 0, "eval_episodes": 2}


def _pool_workers(pid):
    return [c for c in children(pid) if b"resource_tracker" not in Path(f"/proc/{c}/cmdline").read_bytes()]


CLI = "import sys; from rlkit.cli import main; sys.exit(main(sys.argv[1:]))"
WITH_START_METHOD = ("import multiprocessing, sys; from rlkit.ablation import runner; start = sys.argv.pop(1); "
                     "runner.pool_context = lambda: multiprocessing.get_context(start); " + CLI.split("; ", 1)[1])


def _sweep_until(tmp_path, spec, pattern, seconds=120, start=None):
    """A two-worker sweep of ``spec`` (``--pack 1``; ``start``: the pool's start method), once a
    file matching ``pattern`` exists under its directory: (process, spec path, sweep directory)."""
    path, out = spec_file(tmp_path, spec), tmp_path / "out"
    code = [WITH_START_METHOD, start] if start else [CLI]
    proc = subprocess.Popen([sys.executable, "-c", *code, "sweep", path, "--out", str(out), "--workers", "2",
                             "--pack", "1"], cwd=ROOT, start_new_session=True, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: list(out.glob(pattern)), seconds)
    return proc, path, out


def _died_in_one_line(proc, everyone):
    """The sweep's one error line, once it has stopped (exit 2, no traceback) on a worker's death
    and none of ``everyone`` (its workers and theirs) is left."""
    try:
        err = proc.communicate(timeout=90)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the sweep did not stop after one of its workers was killed")
    lines = [line for line in err.strip().splitlines() if line.startswith("rlkit: error:")]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "a sweep worker process died" in lines[0] and "resume with: rlkit sweep" in lines[0]
    assert wait_gone(everyone) == []
    return lines[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_pool_worker_killed_under_a_run_stops_the_sweep_in_one_line_and_it_resumes(tmp_path):
    # Runs long enough to be in flight when a worker dies, short enough for the resume to finish them.
    proc, spec, out = _sweep_until(tmp_path, {**SLOW, "total_steps": 16_384, "checkpoint_every": 1024},
                                   "runs/*/checkpoints/update-*")
    # Both workers inside a run (a busy machine may start the second late): the runs still queued
    # are those that must not start after the death.
    wait_until(lambda: len({p.parent.parent.name for p in out.glob("runs/*/checkpoints/update-*")}) == 2)
    workers = _pool_workers(proc.pid)
    assert workers
    everyone = workers + [c for w in workers for c in children(w)]
    os.kill(workers[0], signal.SIGKILL)
    started = {p.name for p in out.glob("runs/*")}
    line = _died_in_one_line(proc, everyone)
    assert {p.name for p in out.glob("runs/*")} == started  # no queued run started after the death
    again = shlex.split(line.split("resume with: ", 1)[1])
    assert again[:3] == ["rlkit", "sweep", spec]
    done = subprocess.run([sys.executable, "-c", CLI, *again[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = [json.loads(p.read_text()) for p in out.glob("runs/*/result.json")]
    assert len(results) == len(list(out.glob("runs/*"))) >= 2


# A pool worker with a run in flight (holding _IN_RUN) when its pool is abandoned: the run then
# takes ``argv[1]`` seconds more to stop and says so.
WAITS_FOR_EVER = """
import sys, threading, time
from rlkit.ablation import runner
import ctypes
stopping, abandoned = ctypes.c_byte(0), ctypes.c_byte(0)
runner._init_worker(stopping, abandoned)
in_run = threading.Event()
def run():
    with runner._IN_RUN:
        in_run.set()
        while not abandoned.value:
            time.sleep(0.01)
        time.sleep(float(sys.argv[1]))
        print("run stopped", flush=True)
threading.Thread(target=run).start()
in_run.wait()
print("abandoned", flush=True)
abandoned.value = 1
threading.Event().wait()
"""


@pytest.mark.parametrize("run_seconds", [0.0, 1.5])
def test_a_worker_of_an_abandoned_pool_exits_once_its_run_has_stopped(run_seconds):
    # Python >= 3.12 sends a broken pool's workers no "exit" item: the worker must not wait for one.
    done = subprocess.run([sys.executable, "-c", WAITS_FOR_EVER, str(run_seconds)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == "abandoned\nrun stopped\n", done  # not before the run had stopped


def _run_of(worker):
    """The run whose TensorBoard events file the worker holds open."""
    for fd in Path(f"/proc/{worker}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = Path(os.readlink(fd))
            if "events.out.tfevents" in target.name:
                return target.parent.name
    return None


def _worker_of_a_checkpointed_run(proc, out):
    """The pool worker inside a run that has checkpointed (either, when both have)."""
    first = next(out.glob("runs/*/checkpoints/update-*")).parent.parent.name
    (worker,) = [w for w in _pool_workers(proc.pid) if _run_of(w) == first]
    return worker


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_killed_while_ctrl_c_stops_the_sweep_is_reported_and_nothing_hangs(tmp_path):
    # Each update is long (8192 steps, 10 epochs): the kill lands while its run finishes the update.
    proc, spec, out = _sweep_until(tmp_path, LONG_UPDATES, "runs/*/checkpoints/update-*", seconds=180)
    workers = _pool_workers(proc.pid)
    victim = _worker_of_a_checkpointed_run(proc, out)  # its next update has just begun
    everyone = workers + [c for w in workers for c in children(w)]
    os.kill(proc.pid, signal.SIGINT)
    # The sweep ignores SIGINT once it is stopping (as it passes SIGINT to the runs in flight).
    assert wait_until(lambda: signal.SIGINT in signal_set(proc.pid, "SigIgn")), "the sweep did not start to stop"
    os.kill(victim, signal.SIGKILL)
    _died_in_one_line(proc, everyone)
    assert not list(out.glob("status/*.json"))  # neither run recorded as failed (nor done)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("start", ["fork", "spawn"])  # spawn: where CUDA is in reach
def test_an_idle_worker_stops_quietly_when_another_dies(tmp_path, start):
    spec = {**SLOW, "seeds": 1, "variants": {"short": {"total_steps": 1024}, "long": {}}}
    proc, spec, out = _sweep_until(tmp_path, spec, "status/short*.json", start=start)  # its worker has left it

    def in_long():
        return [w for w in _pool_workers(proc.pid) if (_run_of(w) or "").startswith("long")]

    wait_until(in_long)  # a busy machine may start the long run late
    (busy,) = in_long()
    os.kill(busy, signal.SIGKILL)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_run_stopped_by_a_signal_to_its_worker_leaves_the_sweep_unfinished_and_says_so(tmp_path):
    proc, spec, out = _sweep_until(tmp_path, {**SLOW, "seeds": 2}, "runs/*/checkpoints/update-*")
    # The other worker may not have begun its run yet, and a SIGTERM there (the default action) is
    # a worker's death, not a run's stop.
    os.kill(_worker_of_a_checkpointed_run(proc, out), signal.SIGTERM)  # its run checkpoints and stops; the worker lives on
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 1 and "1 run(s) stopped unfinished" in err, err
    assert len(list(out.glob("runs/*/result.json"))) == 1
