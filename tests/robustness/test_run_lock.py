"""One process per run directory: a second ``--resume`` of a run in training is refused in one line,
and a run directory this process cannot write is one line too."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rlkit.cli import main
from rlkit.io.checkpoint import resolve_checkpoint

from tests.robustness.helpers import SMALL, error_line, last_json, run_cli, start_cli

LONG = ["--num-envs", "2", "--num-steps", "64", "--num-minibatches", "2", "--update-epochs", "1",
        "--total-steps", "10000000", "--checkpoint-every", "128", "--eval-episodes", "1"]


def test_a_second_resume_of_a_run_in_training_is_refused_and_changes_nothing(tmp_path):
    run = tmp_path / "runs" / "r"
    first = start_cli("train", *LONG, "--logdir", str(tmp_path / "runs"), "--run-name", "r")
    try:
        deadline = time.time() + 60
        while not (run / "checkpoints" / "latest.json").exists() and time.time() < deadline:
            time.sleep(0.02)
        for changes in ([], ["--total-steps", "20000000"]):
            line = error_line(run_cli("train", "--resume", str(run), *changes))
            assert f"{run} is in use by another rlkit process (pid {first.pid})" in line, line
        assert first.poll() is None  # the run in training goes on
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    assert first.returncode == 130
    done = json.loads((resolve_checkpoint(run) / "state.json").read_text())["env_steps"]
    resumed = last_json(run_cli("train", "--resume", str(run), "--total-steps", str(done + 256)))  # free again
    assert resumed["run_dir"] == str(run.resolve()) and resumed["total_steps"] == done + 256


def test_a_run_directory_that_cannot_be_written_is_one_line(tmp_path):
    out = last_json(run_cli("train", *SMALL, "--logdir", str(tmp_path), "--run-name", "r"))
    run = tmp_path / "r"
    lock = run / ".rlkit-run.lock"
    lock.unlink()
    lock.mkdir()  # the lock cannot be opened, as in a read-only folder (root ignores permissions)
    before = sorted(p.name for p in run.rglob("*"))
    line = error_line(run_cli("train", "--resume", str(run), "--total-steps", "2048"))
    assert f"cannot write in {run}" in line, line
    assert sorted(p.name for p in run.rglob("*")) == before and out["total_steps"] == 1024


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_run_directory_is_one_line(tmp_path):
    last_json(run_cli("train", *SMALL, "--logdir", str(tmp_path), "--run-name", "r"))
    run = tmp_path / "r"
    os.chmod(run, 0o555)
    try:
        assert "cannot write in" in error_line(run_cli("train", "--resume", str(run), "--total-steps", "2048"))
    finally:
        os.chmod(run, 0o755)


def test_a_locked_run_is_refused_before_anything_of_it_is_read(tmp_path):
    """The refusal is the only line: no warning about the run's checkpoints comes first."""
    from rlkit.io.lock import RUN_LOCK, FolderLock

    last_json(run_cli("train", *SMALL, "--logdir", str(tmp_path), "--run-name", "r"))
    run = tmp_path / "r"
    for f in (run / "checkpoints").rglob("*"):
        if f.is_file():
            f.unlink()  # no complete checkpoint: an unlocked resume would warn that the run starts again
    with FolderLock(run, RUN_LOCK, "rlkit process", "resume it again"):
        proc = run_cli("train", "--resume", str(run), "--total-steps", "2048")
    assert "is in use by another rlkit process" in error_line(proc)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize("case", ["existing name", "damaged checkpoint"])
def test_a_start_up_that_fails_after_async_workers_started_is_one_line(tmp_path, case):
    """Env workers started before the failure are stopped quietly: one line, not their tracebacks."""
    last_json(run_cli("train", *SMALL, "--logdir", str(tmp_path), "--run-name", "r"))
    run = tmp_path / "r"
    if case == "existing name":
        proc = run_cli("train", *SMALL, "--async-envs", "--logdir", str(tmp_path), "--run-name", "r")
    else:
        state = resolve_checkpoint(run) / "state.json"
        state.write_text(json.dumps({**json.loads(state.read_text()), "recent_returns": "damaged"}))
        proc = run_cli("train", "--resume", str(run), "--async-envs", "--total-steps", "2048")
    error_line(proc)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def _symlink_loop(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return tmp_path / "a"


def _model_folder(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    return tmp_path / "model"


def _empty_checkpoints(tmp_path):
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    return tmp_path / "run"


@pytest.mark.parametrize("make, words", [
    (lambda tmp: "", "resume must name a run directory"), (lambda tmp: "  ", "resume must name a run directory"),
    (_symlink_loop, "Symlink loop"), (_model_folder, "no checkpoint found"),
    (_empty_checkpoints, "no checkpoint found")], ids=["empty", "blank", "symlink loop", "model folder", "empty ckpts"])
def test_a_resume_of_what_is_not_a_run_is_one_line_and_writes_nothing(tmp_path, make, words):
    target = make(tmp_path)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    for command in ("train", "rlhf"):
        line = error_line(run_cli(command, "--resume", str(target), *(["--logdir", str(tmp_path)] if command == "train"
                                                                        else [])))
        assert words in line
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_a_forked_child_does_not_hold_its_parents_lock(tmp_path):
    """An env worker forked while the run directory is locked (and left behind, stuck in an env,
    when the trainer is killed) does not keep the directory from a resume: the lock goes with the
    process that took it."""
    import multiprocessing

    from rlkit.errors import ConfigError
    from rlkit.io.lock import FolderLock

    def lock():
        return FolderLock(tmp_path, ".lock", "rlkit process", "resume")

    held = lock().acquire()
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    child = ctx.Process(target=_sleep_after, args=(ready,), daemon=True)
    child.start()
    try:
        assert ready.wait(30)
        with pytest.raises(ConfigError, match="in use"):  # the parent's lock holds
            lock().acquire()
        held.release()  # the parent lets go (or dies); the child lives on
        assert child.is_alive()
        lock().acquire().release()
    finally:
        child.kill()
        child.join(10)


def _sleep_after(ready):
    ready.set()
    time.sleep(60)


@contextlib.contextmanager
def unwritable(*folders):
    """``folders`` made unwritable whatever the user: ``chattr +i`` as root (permissions do not stop
    root; the test is skipped where the filesystem has no immutable flag), a read-only mode otherwise."""
    changed = []
    try:
        for folder in folders:
            if os.geteuid() == 0:
                if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)],
                                                                    capture_output=True).returncode:
                    pytest.skip("no chattr +i on this filesystem")
            else:
                os.chmod(folder, 0o555)
            changed.append(folder)
        yield
    finally:
        for folder in changed:
            if os.geteuid() == 0:
                subprocess.run(["chattr", "-i", str(folder)], check=True)
            else:
                os.chmod(folder, 0o755)


def _files(*folders):
    """Every file's bytes under ``folders`` but the lock files (which a refused resume may reopen)."""
    return {p: p.read_bytes() for folder in folders for p in sorted(Path(folder).rglob("*"))
            if p.is_file() and p.name != ".rlkit-run.lock"}


def test_a_resume_into_an_immutable_run_directory_or_checkpoints_folder_is_one_line(tmp_path, capsys):
    """The lock file still opened (it exists), so the event writer's PermissionError was the first
    to notice, as a traceback."""
    tiny = [*SMALL, "--total-steps", "256", "--checkpoint-every", "128", "--no-progress"]
    assert main(["train", *tiny, "--logdir", str(tmp_path), "--run-name", "r"]) == 0
    run = tmp_path / "r"
    before = _files(run)
    for folder in (run, run / "checkpoints"):
        capsys.readouterr()
        with unwritable(folder):
            assert main(["train", "--resume", str(run), "--total-steps", "512"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"rlkit: error: cannot write in {folder}" in err, err
        assert _files(run) == before


def test_a_population_resume_with_one_immutable_member_is_one_line_and_changes_no_member(tmp_path, capsys):
    tiny = [*SMALL, "--total-steps", "256", "--checkpoint-every", "128", "--no-progress"]
    assert main(["train", "--seeds", "1", "2", "3", *tiny, "--logdir", str(tmp_path), "--run-name", "p"]) == 0
    members = [tmp_path / f"p__s{s}" for s in (1, 2, 3)]
    before = _files(*members)
    capsys.readouterr()
    with unwritable(members[1]):
        assert main(["train", "--resume", *map(str, members), "--total-steps", "512"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write in {members[1]}" in err, err
    assert _files(*members) == before


@pytest.mark.parametrize("where", ["sweep", "status"])
def test_a_sweep_into_a_directory_it_cannot_write_is_one_line(tmp_path, capsys, where):
    from rlkit.ablation.results import claim_sweep_dir
    from rlkit.ablation.spec import load_spec
    from rlkit.ablation.sweep import sweep_lock

    spec = tmp_path / "spec.toml"
    spec.write_text('name = "t"\nenvs = ["rlkit-test/IdentityDiscrete-v0"]\nseeds = 1\ntotal_steps = 256\n'
                    'num_envs = 2\nnum_steps = 64\nnum_minibatches = 2\neval_episodes = 1\n[variants]\nppo = {}\n')
    out = tmp_path / "out"
    with sweep_lock(out):  # a sweep directory as a sweep leaves it: its lock file is there
        claim_sweep_dir(out, load_spec(str(spec)), None)
    before = _files(out)
    folder = out if where == "sweep" else out / "status"
    with unwritable(folder):
        assert main(["sweep", str(spec), "--out", str(out), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write in {folder}" in err, err
    assert _files(out) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only file in a writable folder is still replaced by a rename")
def test_an_immutable_result_file_is_one_line_when_the_run_writes_it(tmp_path, capsys):
    tiny = [*SMALL, "--total-steps", "256", "--checkpoint-every", "128", "--no-progress"]
    assert main(["train", *tiny, "--logdir", str(tmp_path), "--run-name", "r"]) == 0
    result = tmp_path / "r" / "result.json"
    before = result.read_bytes()
    capsys.readouterr()
    with unwritable(result):
        assert main(["train", "--resume", str(tmp_path / "r"), "--total-steps", "384"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == f"rlkit: error: could not write {result}: Operation not permitted", err
    assert "Traceback" not in err and result.read_bytes() == before
