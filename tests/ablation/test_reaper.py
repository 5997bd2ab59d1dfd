"""The watchdog that stops a sweep's own Ray instance when the sweep dies (SIGKILL included)."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

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
reaper = start_reaper()
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


def _alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _descendants(pid):
    import psutil

    return [p.pid for p in psutil.Process(pid).children(recursive=True)]


def _start(mode):
    proc = subprocess.Popen([sys.executable, "-c", PARENT, mode], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    before, reaper = map(int, proc.stdout.readline().split())
    return proc, before, reaper


def _wait_gone(pids, seconds=15):
    deadline = time.time() + seconds
    while any(_alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def test_a_killed_sweeps_later_descendants_are_reaped_and_earlier_ones_kept():
    proc, before, reaper = _start("kill")
    try:
        time.sleep(1.5)  # the watchdog has recorded the child and the grandchild
        later = [p for p in _descendants(proc.pid) if p not in (before, reaper)]
        assert len(later) >= 2, later
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert _wait_gone(later) == [] and _wait_gone([reaper]) == []
        assert _alive(before)  # started before the watchdog: not the sweep's Ray instance
    finally:
        subprocess.run(["kill", "-9", str(before)], check=False)


def test_a_stopped_watchdog_exits_and_leaves_what_the_caller_started_before():
    proc, before, reaper = _start("stop")
    try:
        assert proc.stdout.readline().strip() == "stopped"
        assert _wait_gone([reaper]) == [] and _alive(before)
    finally:
        proc.kill()
        subprocess.run(["kill", "-9", str(before)], check=False)
