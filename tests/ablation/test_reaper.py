"""The watchdog that stops a sweep's own Ray instance when the sweep dies (SIGKILL included)."""

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import alive, wait_gone, wait_until

pytest.importorskip("psutil")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

ROOT = Path(__file__).parents[2]
SLEEPER = "import time; time.sleep(120)"
# A sweep-like parent: a process started before the watchdog (not Ray's: kept), the watchdog, then
# a child with a grandchild in its own session (as Ray's workers are); it then waits to be killed,
# or with "stop" stops the watchdog as a sweep does after ray.shutdown().
PARENT = f"""
import subprocess, sys, time
from rlkit.ablation.reaper import start_reaper, stop_reaper
before = subprocess.Popen([sys.executable, "-c", {SLEEPER!r}])
reaper = start_reaper(open(sys.argv[2], "w"))
child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                          "subprocess.Popen([sys.executable, '-c', {SLEEPER!r}], start_new_session=True); "
                          "time.sleep(120)"])
print(before.pid, reaper.pid, flush=True)
time.sleep(2.0)
if sys.argv[1] == "stop":
    child.kill()
    stop_reaper(reaper)
    print("stopped", flush=True)
time.sleep(120)
"""


def _descendants(pid):
    import psutil

    return [p.pid for p in psutil.Process(pid).children(recursive=True)]


def _start(mode, tmp_path):
    """The sweep-like parent, its process started before the watchdog, the watchdog, and the file
    where the watchdog names each process it records."""
    records = tmp_path / "recorded"
    proc = subprocess.Popen([sys.executable, "-c", PARENT, mode, str(records)], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    before, reaper = map(int, proc.stdout.readline().split())
    return proc, before, reaper, records


def _recorded(records):
    return {int(line) for line in records.read_text().split()} if records.exists() else set()


def test_a_killed_sweeps_later_descendants_are_reaped_and_earlier_ones_kept(tmp_path):
    proc, before, reaper, records = _start("kill", tmp_path)
    try:
        def started_later():
            return [p for p in _descendants(proc.pid) if p not in (before, reaper)]

        assert wait_until(lambda: len(started_later()) >= 2)  # the child and its grandchild
        later = started_later()
        assert wait_until(lambda: set(later) <= _recorded(records))  # the watchdog has recorded the child and the grandchild
        assert before not in _recorded(records)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert wait_gone(later) == [] and wait_gone([reaper]) == []
        assert alive(before)  # started before the watchdog: not the sweep's Ray instance
    finally:
        subprocess.run(["kill", "-9", str(before)], check=False)


def test_a_stopped_watchdog_exits_and_leaves_what_the_caller_started_before(tmp_path):
    proc, before, reaper, _ = _start("stop", tmp_path)
    try:
        assert proc.stdout.readline().strip() == "stopped"
        assert wait_gone([reaper]) == [] and alive(before)
    finally:
        proc.kill()
        subprocess.run(["kill", "-9", str(before)], check=False)
