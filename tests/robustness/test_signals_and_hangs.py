"""Interrupts stop a run with a checkpoint and never hang; evaluation always ends."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.processes import signal_set, state, wait_until
from tests.robustness.helpers import ROOT, SMALL, error_line, last_json, logged_steps, run_cli, start_cli


def _start_and_signal(tmp_path, sig, *extra):
    """Start a long run and send ``sig`` once it has logged three updates (well into training)."""
    logdir = tmp_path / "runs"
    args = ["train", "--num-envs", "2", "--num-steps", "64", "--num-minibatches", "2", "--update-epochs", "1",
            "--total-steps", "10000000", "--checkpoint-every", "100000000", "--eval-episodes", "1",
            "--logdir", str(logdir), "--run-name", "r", *extra]
    proc = start_cli(*args)
    assert wait_until(lambda: proc.poll() is not None or (logdir / "r").is_dir() and len(logged_steps(logdir / "r")) >= 3,
                      poll=0.05), "the run logged no update"
    proc.send_signal(sig)  # to the main process only, as `kill -INT PID` or a notebook's interrupt does
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running 60 s after {sig.name}")
    return proc.returncode, err, logdir / "r"


@pytest.mark.parametrize("trial", range(3))
def test_sigint_with_async_envs_stops_with_a_checkpoint_and_never_hangs(tmp_path, trial):
    code, err, run_dir = _start_and_signal(tmp_path, signal.SIGINT, "--async-envs")
    assert code == 130, err[-1500:]
    assert "Traceback" not in err and "RUN_DIR" not in err
    assert f"--resume {run_dir.resolve()}" in err.strip().splitlines()[-1] or f"--resume {run_dir}" in err
    latest = json.loads((run_dir / "checkpoints" / "latest.json").read_text())["checkpoint"]
    assert latest.startswith("update-") and latest in err


@pytest.mark.parametrize("async_envs", [True, False])
def test_sigint_during_start_up_stops_at_the_first_update_boundary(tmp_path, async_envs):
    """A signal while the envs are being built (async workers spawning) is honoured, not lost."""
    marker, logdir = tmp_path / "marker", tmp_path / "runs"
    args = ["train", "--env", "rlkit-test/SlowStart-v0", "--num-envs", "2", "--num-steps", "64",
            "--num-minibatches", "2", "--update-epochs", "1", "--total-steps", "10000000", "--eval-episodes", "0",
            "--logdir", str(logdir), "--run-name", "r", *(["--async-envs"] if async_envs else [])]
    proc = start_cli(*args, env={**os.environ, "RLKIT_TEST_MARKER": str(marker)})
    deadline = time.time() + 60
    while not marker.exists() and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)  # while the first env is being constructed
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("a SIGINT during start-up was lost: the run kept training")
    assert proc.returncode == 130 and "Traceback" not in err, err[-1500:]
    latest = json.loads((logdir / "r" / "checkpoints" / "latest.json").read_text())["checkpoint"]
    assert latest == "update-0000000" and f"--resume {logdir / 'r'}" in err


def test_a_signal_during_a_resumed_runs_start_up_leaves_its_checkpoint_as_it_was(tmp_path):
    """Stopped before its first update, a resumed run has nothing new to save: the checkpoint it
    resumed from stays as it is (not rewritten as an interrupt's), and the next resume continues from it."""

    marker, logdir = tmp_path / "marker", tmp_path / "runs"
    small = ["--num-envs", "2", "--num-steps", "64", "--num-minibatches", "2", "--update-epochs", "1",
             "--eval-episodes", "0"]
    first = run_cli("train", "--env", "rlkit-test/SlowStart-v0", *small, "--total-steps", "256", "--logdir",
                    str(logdir), "--run-name", "r")
    assert first.returncode == 0, first.stderr[-1500:]
    ckpt = logdir / "r" / "checkpoints" / "update-0000002"
    before = {p.name: p.read_bytes() for p in ckpt.iterdir()}
    proc = start_cli("train", "--resume", str(logdir / "r"), "--total-steps", "512",
                     env={**os.environ, "RLKIT_TEST_MARKER": str(marker)})
    deadline = time.time() + 60
    while not marker.exists() and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err[-1500:]
    assert {p.name: p.read_bytes() for p in ckpt.iterdir()} == before
    assert sorted(p.name for p in ckpt.parent.iterdir()) == ["latest.json", "update-0000002"]
    assert f"--resume {logdir / 'r'}" in err


# The `rlkit` command (rlkit_launch), stopping itself (SIGSTOP) where the test is to send its
# signals: when the module named first begins to import, and, with "exit", when it first writes to
# stderr (the line of an exit under way).
PAUSES = """
import os, signal, sys
module, at_exit = sys.argv.pop(1), sys.argv.pop(1) == "exit"

class PauseAtImport:
    def find_spec(self, name, path=None, target=None):
        if name == module:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGSTOP)
        return None

class PauseAtFirstWrite:
    def __init__(self, stream):
        self.stream, self.paused = stream, False
    def write(self, text):
        if not self.paused:
            self.paused = True
            os.kill(os.getpid(), signal.SIGSTOP)
        return self.stream.write(text)
    def __getattr__(self, name):
        return getattr(self.stream, name)

sys.meta_path.insert(0, PauseAtImport())
if at_exit:
    sys.stderr = PauseAtFirstWrite(sys.stderr)
import rlkit_launch
sys.exit(rlkit_launch.main())
"""


def _paused(proc):
    assert wait_until(lambda: state(proc.pid) in ("T", "Z", None), 60), "the process never paused"
    assert state(proc.pid) == "T", proc.communicate()[1][-1500:]


def _start_paused(tmp_path, module, at_exit=False):
    """The `rlkit train` command stopped as ``module`` begins to import, inside the imports'
    blocked-signals window (checked)."""
    cmd = [sys.executable, "-c", PAUSES, module, "exit" if at_exit else "no", "train", "--preset", "cartpole",
           "--total-steps", "4096", "--logdir", str(tmp_path / "runs"), "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    _paused(proc)
    assert {signal.SIGINT, signal.SIGTERM} <= signal_set(proc.pid, "SigBlk")  # the imports' window
    return proc


STARTING = "rlkit: interrupted while starting; nothing was written"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("module", ["torch._C", "rlkit.cli"])  # torch's C++ start-up; rlkit, after torch
def test_a_signal_while_rlkit_is_still_importing_is_one_line(tmp_path, module, sig):
    """The ``rlkit`` command's entry point (rlkit_launch) before its imports are done: one line,
    exit code 128 + the signal, nothing written."""
    proc = _start_paused(tmp_path, module)
    proc.send_signal(sig)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig and err.strip().splitlines() == [STARTING], (proc.returncode, err[-1500:])
    assert not (tmp_path / "runs").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("first, second", [(signal.SIGINT, signal.SIGTERM), (signal.SIGTERM, signal.SIGINT)])
def test_a_second_signal_while_rlkit_exits_from_its_imports_changes_nothing(tmp_path, first, second):
    """Ctrl-C pressed twice (or a SIGTERM after it) before the imports are done: the second signal
    lands while the first one's exit is under way (its line being written) and is ignored."""
    proc = _start_paused(tmp_path, "torch._C", at_exit=True)
    proc.send_signal(first)
    proc.send_signal(signal.SIGCONT)
    _paused(proc)  # in the first signal's handler, writing its line
    assert {signal.SIGINT, signal.SIGTERM} <= signal_set(proc.pid, "SigIgn")  # the exit holds them off
    proc.send_signal(second)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + first and err.strip().splitlines() == [STARTING], (proc.returncode, err[-1500:])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("first, second", [(signal.SIGINT, signal.SIGTERM), (signal.SIGTERM, signal.SIGINT)])
def test_two_signals_pending_when_the_imports_end_are_one_line(tmp_path, first, second):
    """Both signals arrive while the imports hold them back: when they end, Python runs the pending
    handlers in signal-number order, so SIGINT's (the lower) ends the process, in one line."""
    proc = _start_paused(tmp_path, "torch._C")
    proc.send_signal(first)
    proc.send_signal(second)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT and err.strip().splitlines() == [STARTING], (proc.returncode, err)


def test_sigterm_is_handled_like_sigint(tmp_path):
    code, err, run_dir = _start_and_signal(tmp_path, signal.SIGTERM, "--async-envs")
    assert code == 128 + signal.SIGTERM, err[-1500:]
    assert "Traceback" not in err and "BrokenPipe" not in err
    assert (run_dir / "checkpoints" / "latest.json").is_file()
    resumed = last_json(run_cli("train", "--resume", str(run_dir), "--total-steps",
                                str(json.loads(next(run_dir.glob("checkpoints/update-*/state.json")).read_text())
                                    ["env_steps"] + 256)))
    assert resumed["run_dir"] == str(run_dir.resolve())


def test_evaluation_of_an_env_that_never_ends_is_capped(tmp_path):
    out = last_json(run_cli("train", *SMALL, "--env", "rlkit-test/Endless-v0", "--logdir", str(tmp_path),
                            "--run-name", "e", "--eval-episodes", "2", "--eval-max-steps", "500", timeout=120))
    assert out["eval_return_mean"] is not None
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "e"), size_guidance={"scalars": 0})
    acc.Reload()
    assert [e.value for e in acc.Scalars("eval/capped_episodes")] == [2.0]
    ev = last_json(run_cli("eval", str(tmp_path / "e"), "--episodes", "1", timeout=120))
    assert ev["capped_episodes"] == 1 and ev["eval_steps"] == 10_000  # the default cap without a time limit


def test_a_dead_async_worker_is_an_env_error(tmp_path):
    line = error_line(run_cli("train", *SMALL, "--env", "rlkit-test/DyingWorker-v0", "--async-envs",
                              "--logdir", str(tmp_path), timeout=120))
    assert "rlkit-test/DyingWorker-v0" in line


def _wait_for(path, proc, timeout=60):
    deadline = time.time() + timeout
    while not path.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.002)
    assert path.exists(), f"{path} never appeared"


@pytest.mark.parametrize("gap", [0.005, 0.05])
@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_while_the_run_stops_is_still_one_line(tmp_path, gap, second):
    """The second signal lands while the first one's checkpoint is written or reported."""
    logdir = tmp_path / "runs"
    args = ["train", "--num-envs", "2", "--num-steps", "64", "--num-minibatches", "2", "--update-epochs", "1",
            "--total-steps", "10000000", "--checkpoint-every", "128", "--eval-episodes", "1",
            "--logdir", str(logdir), "--run-name", "r"]
    proc = start_cli(*args)
    _wait_for(logdir / "r" / "checkpoints" / "update-0000003", proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(gap)
    proc.send_signal(second)
    _, err = proc.communicate(timeout=60)
    lines = err.strip().splitlines()
    assert proc.returncode in (130, 128 + second) and "Traceback" not in err, err[-1500:]
    assert len(lines) == 1 and lines[0].startswith("rlkit: SIG") and f"--resume {logdir / 'r'}" in lines[0], err


def test_a_signal_during_the_final_evaluation_stops_it_and_a_resume_evaluates(tmp_path):
    logdir, run = tmp_path / "runs", tmp_path / "runs" / "r"
    args = ["train", "--env", "rlkit-test/Endless-v0", "--num-envs", "2", "--num-steps", "64",
            "--num-minibatches", "2", "--update-epochs", "1", "--total-steps", "256", "--checkpoint-every", "128",
            "--eval-episodes", "1", "--eval-max-steps", "100000000", "--logdir", str(logdir), "--run-name", "r"]
    marker = tmp_path / "marker"  # the evaluation's episode at its 1000th step (a training episode has 64)
    proc = start_cli(*args, env={**os.environ, "RLKIT_TEST_MARKER": str(marker)})
    _wait_for(marker, proc)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("a SIGINT during the final evaluation was ignored")
    assert proc.returncode == 130 and "Traceback" not in err, err[-1500:]
    assert "stopped at once; its newest checkpoint update-0000002 stands" in err
    assert not (run / "result.json").exists()
    out = last_json(run_cli("train", "--resume", str(run), "--eval-max-steps", "50"))
    assert out["total_steps"] == 256 and out["eval_return_mean"] is not None


def _stuck_then_signal(tmp_path, *args):
    """``rlkit train ARGS`` on an env whose seed-200 instance sleeps in its step from its 151st
    step on; one SIGTERM once it is stuck (its marker file appears). Returns (exit code, stderr)."""
    import os

    from rlkit.io.signals import STOP_GRACE_SECONDS

    marker = tmp_path / "stuck"
    argv = ["train", "--env", "rlkit-test/HangsForSeed200-v0", "--num-envs", "2", "--num-steps", "64",
            "--num-minibatches", "2", "--update-epochs", "1", "--total-steps", "1000000", "--checkpoint-every", "128",
            "--eval-episodes", "1", "--logdir", str(tmp_path / "runs"), "--no-progress", *args]
    proc = start_cli(*argv, env={**os.environ, "RLKIT_TEST_MARKER": str(marker)})
    deadline = time.time() + 120
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate(timeout=30)[1][-2000:]
    proc.send_signal(signal.SIGTERM)  # one signal
    try:
        _, err = proc.communicate(timeout=STOP_GRACE_SECONDS + 60)  # a bound on a hang, not a timing
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("still running long after one SIGTERM (an env stuck in its step)")
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err, (proc.returncode, err[-2000:])
    return err


@pytest.mark.parametrize("async_envs, stopped", [(["--async-envs"], ["p__s100", "p__s200"]), ([], ["p__s200"])],
                         ids=["env-worker", "in-process"])
def test_one_signal_stops_a_population_whose_env_is_stuck_in_its_step(tmp_path, async_envs, stopped):
    """The members it can are checkpointed after the update in flight; those whose envs were given
    up (with --async-envs: every member stepping in the stuck worker) keep their newest checkpoint."""
    err = _stuck_then_signal(tmp_path, "--seeds", "1", "100", "200", "--run-name", "p", *async_envs)
    lines = err.strip().splitlines()
    given_up = [line for line in lines if line.startswith("rlkit: error: population member")]
    assert [line.split()[4].rsplit("/", 1)[-1] for line in given_up] == stopped, err
    assert all("did not return from a step within" in line for line in given_up), err
    live = [d for d in ("p__s1", "p__s100", "p__s200") if d not in stopped]
    assert "checkpoint update-0000003 written" in lines[-1] and lines[-1].endswith(
        " ".join(str(tmp_path / "runs" / d) for d in live)), lines[-1]
    for d in live:
        assert json.loads((tmp_path / "runs" / d / "checkpoints" / "latest.json").read_text())["checkpoint"] == \
            "update-0000003"


def test_one_signal_stops_a_run_whose_env_is_stuck_in_its_step(tmp_path):
    err = _stuck_then_signal(tmp_path, "--seed", "200", "--run-name", "r")
    lines = [line for line in err.strip().splitlines() if line.startswith("rlkit: ")]
    assert len(lines) == 1, err  # why the stop came at once and what it left, in one line
    assert "did not return from a step within" in lines[0], err
    assert "stopped at once; its newest checkpoint update-0000002 stands" in lines[0], err


def test_one_signal_stops_a_run_whose_env_never_closes(tmp_path):
    """After the stop's checkpoint the envs are closed; a close() that never returns is left after
    the grace period with a warning, and the stop is reported as usual."""
    code, err, run_dir = _start_and_signal(tmp_path, signal.SIGTERM, "--env", "rlkit-test/CloseHangs-v0")
    assert code == 128 + signal.SIGTERM and "Traceback" not in err, err[-1500:]
    assert "did not close within" in err and "checkpoint update-" in err.strip().splitlines()[-1], err[-1500:]


@pytest.mark.parametrize("argv, kept", [
    (["train", "--resume", "r", "--total-steps", "4096"], ["--total-steps", "4096"]),
    (["train", "--total-steps=4096", "--resume", "r"], ["--total-steps=4096"]),
    (["rlhf", "--resume=r", "--iterations", "9"], ["--iterations", "9"]),
    (["train", "--resume", "a", "b", "--total-steps", "8192", "--no-progress"], ["--total-steps", "8192", "--no-progress"]),
    (["rlhf", "--resume", "r", "--policy", "moved/m", "--reward", "f.py:g", "--reward-weights", "1", "-0.5"],
     ["--policy", "moved/m", "--reward", "f.py:g", "--reward-weights", "1", "-0.5"]),
    (["train", "--total-steps", "4096"], []),  # a fresh run: its config.json holds every setting
])
def test_the_resume_command_of_a_stop_repeats_the_flags_a_resume_was_given(argv, kept):
    from rlkit.cli_flags import resume_flags

    assert resume_flags(argv) == kept


def test_a_stop_that_came_at_once_says_why_in_its_exception_text(tmp_path):
    """A sweep's log and a Python caller see the exception's text only: the reason is in it."""
    from rlkit.io.signals import Interrupted

    stop = Interrupted(signal.SIGINT, tmp_path, None, written=False, reason="the env step did not return within 5 s")
    assert str(stop).endswith("(the env step did not return within 5 s)") and "no checkpoint" in str(stop)
    assert "(" not in str(Interrupted(signal.SIGTERM, tmp_path, None))
