"""``rlkit report`` rebuilds a sweep's tables from its runs' folders; on a folder that holds the
tables but not the runs (a committed report's copy) it refuses in one line and rewrites nothing; a
baseline without finished runs is named as the user gave it or as the spec's."""

import shutil
from pathlib import Path

from rlkit.cli import main

from tests.ablation.test_hostile_sweeps import fake_sweep

COMMITTED = Path(__file__).parents[2] / "experiments" / "recurrent" / "novel"


def test_a_report_on_tables_without_their_runs_rewrites_nothing(tmp_path, capsys):
    copy = tmp_path / "novel"
    copy.mkdir()
    for name in ("manifest.json", "results.csv", "runs.csv"):
        shutil.copy(COMMITTED / name, copy / name)
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    assert main(["report", str(copy), "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlkit: error: ") and "\n" not in err and "would drop them" in err
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before
    assert not (tmp_path / "rep").exists()


def test_a_spec_baseline_without_finished_runs_is_named_as_the_specs(tmp_path, capsys):
    out = fake_sweep(tmp_path, {("a", "CartPole-v1", 1): None, ("b", "CartPole-v1", 1): [10.0, 20.0]})
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "rlkit: error: the spec's baseline 'a' has no finished runs; choose another with --baseline: b"
