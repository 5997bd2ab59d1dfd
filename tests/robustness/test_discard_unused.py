"""A run directory that a killed start-up left holds nothing to keep: its lock and half-written
files go, so the run starts anew; anything written stays."""

from rlkit.io.checkpoint import discard_unused
from rlkit.io.lock import RUN_LOCK


def test_a_run_dir_with_only_its_lock_and_a_half_written_file_is_removed(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / RUN_LOCK).write_text("123")
    (run / ".config.json.4242.tmp").write_text("{")
    discard_unused(run)
    assert not run.exists()


def test_a_run_dir_with_a_written_file_stays_whole(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / RUN_LOCK).write_text("123")
    (run / ".config.json.4242.tmp").write_text("{")
    (run / "config.json").write_text("{}")
    discard_unused(run)
    assert sorted(p.name for p in run.iterdir()) == sorted([RUN_LOCK, ".config.json.4242.tmp", "config.json"])
