"""Env code that fails in ways other than the usual: a module that does not import (a SyntaxError,
any error its code raises, ``sys.exit``), an env whose ``close()`` raises. Each is one line or
one warning, in a single run, a population, a sweep (``--dry-run`` too), ``rlkit eval`` and
``rlkit report``; nothing is written before the refusal."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from rlkit.cli import main

BROKEN = {"syntax": "def broken(:\n", "runtime": "raise RuntimeError('no simulator licence')\n",
          "json": "import json\njson.loads('{')\n", "exit": "import sys\nsys.exit(3)\n",
          "base": "class SimulatorGone(BaseException):\n    pass\nraise SimulatorGone('no display')\n"}
"""Module texts that fail to import, none with an ImportError (one with a BaseException that is
neither an Exception, SystemExit nor KeyboardInterrupt)."""
TINY = {"total_steps": 256, "num_envs": 2, "num_steps": 64, "num_minibatches": 2, "update_epochs": 1,
        "eval_episodes": 1}


def _spec(tmp_path: Path, env: str, seeds: int = 1) -> str:
    path = tmp_path / "spec.toml"
    fields = "\n".join(f"{k} = {v}" for k, v in TINY.items())
    path.write_text(f'name = "t"\nenvs = ["{env}"]\nseeds = {seeds}\n{fields}\n[variants]\nppo = {{}}\n')
    return str(path)


def _last_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("rlkit: error: "), err
    return line


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_an_env_module_that_fails_to_import_is_one_line_for_train_and_sweep(tmp_path, monkeypatch, capsys, kind):
    name = f"rlkit_broken_{kind}"
    (tmp_path / f"{name}.py").write_text(BROKEN[kind])
    monkeypatch.syspath_prepend(str(tmp_path))
    env, runs, out = f"{name}:Foo-v0", tmp_path / "runs", tmp_path / "sweep"
    assert main(["train", "--env", env, "--logdir", str(runs)]) == 2
    assert f"cannot import module {name!r}" in _last_error(capsys)
    for dry in (["--dry-run"], []):
        assert main(["sweep", _spec(tmp_path, env), "--out", str(out), *dry]) == 2
        assert f"cannot import module {name!r}" in _last_error(capsys)
    assert not runs.exists() and not out.exists()


def test_eval_of_a_run_whose_env_module_now_fails_to_import_is_one_line(tmp_path, monkeypatch, capsys):
    module = tmp_path / "rlkit_later_broken.py"
    module.write_text("import gymnasium as gym\n"
                      "gym.register('LaterBroken-v0', entry_point='tests.toy_envs:IdentityDiscrete')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    assert main(["train", "--env", "rlkit_later_broken:LaterBroken-v0", *flags, "--logdir", str(tmp_path / "runs"),
                 "--run-name", "r", "--no-progress"]) == 0
    module.write_text("raise RuntimeError('the simulator is gone')  # a longer text: the cached bytecode is stale\n")
    sys.modules.pop("rlkit_later_broken", None)
    importlib.invalidate_caches()
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "runs" / "r"), "--episodes", "1", "--no-progress"]) == 2
    assert "RuntimeError: the simulator is gone" in _last_error(capsys)


CLOSE_FAILS = ["rlkit-test/CloseRaises-v0", "rlkit-test/CloseInterrupts-v0"]
"""Envs whose close() raises: an exception, and a KeyboardInterrupt that no signal raised."""


@pytest.mark.parametrize("env", CLOSE_FAILS)
@pytest.mark.parametrize("async_envs", [[], ["--async-envs"]], ids=["in-process", "async"])
def test_a_population_of_an_env_whose_close_raises_finishes_with_one_warning(tmp_path, capsys, caplog, async_envs,
                                                                            env):
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    assert main(["train", "--seeds", "1", "2", "--env", env, *flags, *async_envs,
                 "--logdir", str(tmp_path), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["seed"] for line in out.strip().splitlines()] == [1, 2]
    assert "Traceback" not in err, err
    assert sum("failed while closing" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("env", CLOSE_FAILS)
def test_a_sweep_and_its_report_of_an_env_whose_close_raises_finish(tmp_path, capsys, env):
    """The sweep probes the env (its pack check) in its own process after writing its manifest: a
    close() that raised there stopped every attempt."""
    spec, out = _spec(tmp_path, env, seeds=2), tmp_path / "sweep"
    assert main(["sweep", spec, "--out", str(out), "--workers", "1"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["done"] == 2
    assert main(["report", str(out), "--reps", "100"]) == 0
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("async_envs", [[], ["--async-envs"]], ids=["in-process", "async"])
def test_an_env_that_calls_sys_exit_is_an_env_error_not_a_silent_exit(tmp_path, capsys, async_envs):
    """``sys.exit(0)`` in an env's constructor or step ended rlkit with exit code 0 and no word,
    a run directory half-written."""
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    for env in ("rlkit-test/ExitsOnInit-v0", "rlkit-test/ExitsForSeed100-v0"):
        assert main(["train", "--env", env, "--seed", "100", *flags, *async_envs, "--logdir", str(tmp_path),
                     "--no-progress"]) == 2
        assert env in _last_error(capsys)
    assert main(["train", "--env", "rlkit-test/ExitsForSeed100-v0", "--seeds", "1", "100", *flags, *async_envs,
                 "--logdir", str(tmp_path), "--no-progress"]) == 1  # the member fails, the other finishes
    out, err = capsys.readouterr()
    assert [json.loads(line).get("error") is None for line in out.splitlines()] == [True, False]
    assert "Traceback" not in err and err.count("rlkit: error: population member seed 100 failed") == 1, err
