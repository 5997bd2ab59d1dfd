"""The warm CLI of the tests (tests/warm_cli.py) gives what a fresh process gives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests import warm_cli
from tests.processes import wait_until
from tests.robustness.helpers import ROOT, SMALL, cli_command, logged_steps, start_cli


def _cold(args: list[str], cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(cli_command(*args), cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args", [["--help"], ["train", "--num-envs", "0"], ["train", "--no-such-flag"],
                                  ["eval", "no/such/run"]])
def test_a_warm_call_gives_a_fresh_processes_exit_code_stdout_and_stderr(args, monkeypatch):
    monkeypatch.delenv("RLKIT_TESTS_COLD", raising=False)
    warm, cold = warm_cli.run(args), _cold(args)
    assert warm is not None
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert warm_cli.run(args, cwd=ROOT / "tests") is None  # elsewhere a fresh process does not find the toy envs


def test_a_warm_run_writes_what_a_fresh_one_writes(tmp_path, monkeypatch):
    monkeypatch.delenv("RLKIT_TESTS_COLD", raising=False)
    args = ["train", "--env", "CartPole-v1", *SMALL, "--run-name", "r", "--seed", "3"]
    warm = warm_cli.run([*args, "--logdir", str(tmp_path / "warm" / "runs")])
    cold = _cold([*args, "--logdir", str(tmp_path / "cold" / "runs")])
    assert warm.returncode == cold.returncode == 0, warm.stderr[-2000:]
    made = [sorted(p.name.split(".out.")[0] for p in (tmp_path / k / "runs").rglob("*")) for k in ("warm", "cold")]
    assert made[0] == made[1] and made[0]
    # The weights are the same bits: the warm child is the same program from the same seed.
    weights = "runs/r/checkpoints/update-0000008/tensors.safetensors"
    assert (tmp_path / "warm" / weights).read_bytes() == (tmp_path / "cold" / weights).read_bytes()


ENDINGS = {"exception": "raise RuntimeError('boom')", "message": "raise SystemExit('bye')", "code": "sys.exit(3)",
           "none": "pass", "ctrl-c": "raise KeyboardInterrupt",
           "atexit": "atexit.register(lambda: print('atexit ran', flush=True))",
           "thread": "threading.Thread(target=lambda: (time.sleep(0.2), print('thread ran'))).start()"}


@pytest.mark.parametrize("ending", ENDINGS)
def test_the_warm_child_ends_as_python_ends_a_process(ending):
    """Exit code, stdout and stderr's last line of a body run as a script and as a warm child's entry."""
    prelude = "import atexit, sys, threading, time\n"
    as_entry = prelude + "import tests.warm_cli as w\ndef entry():\n    " + ENDINGS[ending] + "\nw._exit_as_python_does(entry)\n"
    runs = [subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
            for code in (prelude + ENDINGS[ending], as_entry)]
    last = [(r.stderr.strip().splitlines() or [""])[-1] for r in runs]
    assert (runs[0].returncode, runs[0].stdout, last[0]) == (runs[1].returncode, runs[1].stdout, last[1])


def test_each_environment_gets_its_own_server_and_rlkit_tests_cold_none(monkeypatch):
    """A variable set for good by a library a test imported must not turn every later call cold,
    and a variable that acts at start-up must reach the imports of the server that serves it."""
    monkeypatch.delenv("RLKIT_TESTS_COLD", raising=False)
    monkeypatch.setattr(warm_cli, "_servers", {})
    plain = warm_cli.run(["--help"])
    assert plain is not None and len(warm_cli._servers) == 1
    monkeypatch.setenv("RLKIT_WARM_TEST_MARK", "1")
    marked = warm_cli.run(["--help"])
    assert marked is not None and marked.stdout == plain.stdout and len(warm_cli._servers) == 2
    monkeypatch.setenv("RLKIT_WARM_TEST_MARK", "2")  # a third environment: the least recently used server goes
    assert warm_cli.run(["--help"]).stdout == plain.stdout and len(warm_cli._servers) == warm_cli.MAX_SERVERS == 2
    assert {s.env.get("RLKIT_WARM_TEST_MARK") for s in warm_cli._servers.values()} == {"1", "2"}
    monkeypatch.setenv("RLKIT_TESTS_COLD", "1")
    monkeypatch.delenv("RLKIT_WARM_TEST_MARK")
    assert warm_cli.run(["--help"]) is None
    for s in warm_cli._servers.values():
        s.close()


def test_warm_processes_run_side_by_side_and_end_by_a_signal_as_a_fresh_one(tmp_path):
    """Two commands started warm at once both run (the server waits on neither alone); a signal
    to one ends it as it ends a fresh process, in a session of its own, and leaves the other."""
    long = ["train", *SMALL[:-2], "--total-steps", "10000000", "--checkpoint-every", "100000000", "--run-name", "r"]
    procs = [start_cli(*long, "--logdir", str(tmp_path / name)) for name in ("a", "b")]
    cold = subprocess.Popen(cli_command(*long, "--logdir", str(tmp_path / "c")), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for name in ("a", "b", "c"):
            assert wait_until(lambda: (tmp_path / name / "r").is_dir() and logged_steps(tmp_path / name / "r")), name
        assert all(p.poll() is None for p in procs) and os.getsid(procs[0].pid) == procs[0].pid
        for p in (procs[0], cold):
            p.send_signal(signal.SIGINT)
        warm_err, cold_err = procs[0].communicate(timeout=120)[1], cold.communicate(timeout=120)[1]
        assert procs[0].returncode == cold.returncode == 130 and procs[1].poll() is None
        last = [e.strip().splitlines()[-1] for e in (warm_err, cold_err)]
        assert last[0].split("update-")[0].replace(str(tmp_path / "a"), "X") == \
            last[1].split("update-")[0].replace(str(tmp_path / "c"), "X"), last
    finally:
        for p in (*procs, cold):
            p.kill()
        procs[1].wait(60)
