"""``rlkit report`` rebuilds a sweep's tables from its runs' folders; on a folder that holds the
tables but not the runs (a committed report's copy) it refuses in one line and rewrites nothing."""

import shutil
from pathlib import Path

from rlkit.cli import main

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
