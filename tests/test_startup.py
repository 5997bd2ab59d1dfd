"""The CLI starts at once: the usage, every command's --help, ``rlkit sweep --dry-run``,
``rlkit report`` and ``rlkit records`` never import torch, through the ``rlkit`` entry point
(rlkit_launch) or the CLI's main; the entry point imports torch, with signals held off, for the
commands that run on it (tests/robustness checks that window)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).parents[1]
MARK = "torch imported: "
LAUNCH = f"""
import sys
import rlkit_launch
try:
    code = rlkit_launch.main()
except SystemExit as exc:  # --help
    code = exc.code
print("{MARK}" + str("torch" in sys.modules), file=sys.stderr)
sys.exit(code)
"""
MAIN = f"""
import contextlib, io, json, sys
from rlkit.cli import main
codes = []
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            codes.append(main(argv))
        except SystemExit as exc:
            codes.append(exc.code)
from rlkit.ablation import records, references
score = references.random_return("CartPole-v1", episodes=2)  # what a report measures without the spec's scores
print(json.dumps(codes))
print("{MARK}" + str("torch" in sys.modules), file=sys.stderr)
"""
SPEC = """name = "tiny"
envs = ["CartPole-v1"]
seeds = 2
preset = "cartpole"
total_steps = 1024

[variants]
ppo = {}
outer = { outer_lr = 1.5 }
"""


def torch_imported(proc: subprocess.CompletedProcess) -> bool:
    line = next(l for l in proc.stderr.splitlines() if l.startswith(MARK))
    return line == MARK + "True"


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["sweep", "SPEC", "--dry-run"]], ids=" ".join)
def test_the_rlkit_command_starts_without_torch(tmp_path, argv):
    (tmp_path / "tiny.toml").write_text(SPEC)
    argv = [str(tmp_path / "tiny.toml") if a == "SPEC" else a for a in argv]
    proc = subprocess.run([sys.executable, "-c", LAUNCH, *argv, *(["--out", str(tmp_path / "out")] if "sweep" in argv
                                                                     else [])],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not torch_imported(proc)
    if "sweep" in argv:
        assert "4 runs in" in proc.stderr and not (tmp_path / "out").exists()  # planned, nothing written


def test_every_help_a_report_and_records_import_no_torch():
    """The commands rlkit_launch starts without torch (needs_torch false) must never import it:
    an import there would run torch's start-up without the signals held off. A report's random
    policy (the end of min-max normalization it measures) runs without it too."""
    from rlkit.cli import needs_torch

    commands = [[], ["--help"], ["train", "--help"], ["train", "--preset", "mujoco", "hp3o", "--help"],
                ["eval", "--help"], ["rlhf", "--help"], ["rlhf", "tiny-models", "--help"], ["rm", "train", "--help"],
                ["sweep", "--help"], ["report", "--help"], ["records", "--help"],
                *[["report", tool, "--help"] for tool in ("walltime", "tags", "staleness", "scalars")]]
    assert not [argv for argv in commands if needs_torch(argv)]
    proc = subprocess.run([sys.executable, "-c", MAIN, json.dumps(commands)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == [2] + [0] * (len(commands) - 1), proc.stderr[-2000:]
    assert not torch_imported(proc)


@pytest.mark.parametrize("argv, torch", [
    (["train", "--env", "CartPole-v1"], True), (["eval", "runs/x"], True), (["rlhf", "--policy", "p"], True),
    (["rlhf", "tiny-models", "d"], True), (["rm", "train"], True), (["sweep", "s.toml"], True),
    (["sweep", "s.toml", "--dry-run"], False), (["report", "d"], False), (["records", "keep", "a", "b"], False),
    (["report", "walltime", "d"], True), (["report", "tags", "d", "--tags", "t"], False),
    (["report", "staleness", "d"], False), (["report", "scalars", "r"], False), (["report", "--", "walltime"], False),
    (["train", "--help"], False), (["rm", "train", "-h"], False), ([], False), (["bogus"], False)])
def test_the_entry_point_imports_torch_first_for_the_commands_that_run_on_it(argv, torch):
    from rlkit.cli import needs_torch

    assert needs_torch(argv) is torch


def test_a_recurrent_specs_dry_run_imports_no_torch(tmp_path):
    """Checking a recurrent config (--memory) needs no torch: the built-in torsos' names are known."""
    spec = ROOT / "experiments" / "recurrent" / "novel.toml"
    proc = subprocess.run([sys.executable, "-c", LAUNCH, "sweep", str(spec), "--dry-run", "--out", str(tmp_path / "o")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "runs in" in proc.stderr, proc.stderr[-2000:]
    assert not torch_imported(proc)


def test_the_built_in_torsos_are_the_ones_core_registers():
    from rlkit.core.memory import MEMORIES
    from rlkit.gym.memory_check import BUILT_IN_MEMORIES

    assert set(BUILT_IN_MEMORIES) <= set(MEMORIES)
