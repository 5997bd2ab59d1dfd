"""A worker that follows its owner exits when the owner process dies, even while it is stuck (a
sleep standing for an env that never returns from its step); it does not die when the thread that
started it ends, and under a fork server it follows the process that asked for it."""

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

SCRIPT = """
import multiprocessing, os, sys, threading, time
from rlkit.io.process import die_with_owner

def stuck():
    die_with_owner()
    time.sleep(120)

def start(ctx, out):
    child = ctx.Process(target=stuck)
    child.start()
    out.append(child)

if __name__ == "__main__":
    method, in_thread = sys.argv[1], sys.argv[2] == "thread"
    ctx = multiprocessing.get_context(method)
    out = []
    if in_thread:  # the thread that starts the worker ends at once
        t = threading.Thread(target=start, args=(ctx, out))
        t.start()
        t.join()
    else:
        start(ctx, out)
    time.sleep(1.5)
    print(out[0].pid, out[0].is_alive(), flush=True)
    time.sleep(120)
"""


@pytest.mark.parametrize("method, where", [("fork", "main"), ("fork", "thread"), ("forkserver", "main")])
def test_a_stuck_worker_exits_with_its_owner_process(tmp_path, method, where):
    if method not in __import__("multiprocessing").get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    script = tmp_path / "owner.py"  # a file: a fork server imports the worker's function from it
    script.write_text(SCRIPT)
    owner = subprocess.Popen([sys.executable, str(script), method, where], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        pid, alive = owner.stdout.readline().split()
        assert alive == "True"  # the thread that started it is gone; the owner lives: it lives
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(10)
        deadline = time.time() + 10
        while _alive(int(pid)) and time.time() < deadline:
            time.sleep(0.05)
        assert not _alive(int(pid))
    finally:
        owner.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(owner.pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    return True
