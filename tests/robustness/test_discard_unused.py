"""What a killed writer leaves goes: a run directory that a killed start-up left (its lock and
half-written files) is removed so the run starts anew, and a checkpoint written clears a killed
checkpoint writer's temporaries; anything written stays."""

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


def test_a_checkpoint_written_removes_a_killed_writers_leftovers_and_keeps_the_rest(tmp_path):
    import torch

    from rlkit.io.checkpoint import save_checkpoint

    root = tmp_path / "checkpoints"
    (root / ".step_1.tmp").mkdir(parents=True)
    (root / ".step_1.tmp" / "tensors.safetensors").write_bytes(b"half")
    (root / ".latest.json.4242.tmp").write_text("{")
    (root / "notes.txt").write_text("mine")
    save_checkpoint(tmp_path, "step_2", {"w": torch.ones(2)}, {"step": 2})
    assert sorted(p.name for p in root.iterdir()) == ["latest.json", "notes.txt", "step_2"]
