"""A worker asked to die with its parent is killed by the kernel when the parent dies, even while
it is stuck (a sleep standing for an env that never returns from its step)."""

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

SCRIPT = """
import multiprocessing, os, sys, time
from rlkit.io.process import die_with_parent

def stuck(parent):
    die_with_parent(parent)
    time.sleep(120)

if __name__ == "__main__":
    child = multiprocessing.get_context("fork").Process(target=stuck, args=(os.getpid(),))
    child.start()
    print(child.pid, flush=True)
    time.sleep(120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_stuck_worker_dies_with_its_parent():
    parent = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        child = int(parent.stdout.readline())
        time.sleep(0.5)  # the child has made its request
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.time() + 10
        while _alive(child) and time.time() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        parent.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie is dead
    except FileNotFoundError:
        return False
