"""What rlkit writes never takes what a user keeps: checkpoint pruning removes only checkpoints,
and a new file refuses to replace one that appeared meanwhile."""

import pytest
import torch

from rlkit.errors import OutputError
from rlkit.io.checkpoint import save_checkpoint
from rlkit.io.files import write_new


def test_pruning_keeps_the_newest_checkpoints_and_every_folder_that_is_not_one(tmp_path):
    root = tmp_path / "checkpoints"
    (root / "best").mkdir(parents=True)
    (root / "best" / "notes.txt").write_text("mine")
    (root / "empty").mkdir()
    for update in range(1, 5):
        save_checkpoint(tmp_path, f"update-{update:07d}", {"w": torch.ones(2) * update}, {"update": update})
    kept = sorted(p.name for p in root.iterdir() if p.is_dir())
    assert kept == ["best", "empty", "update-0000003", "update-0000004"]
    assert (root / "best" / "notes.txt").read_text() == "mine"


def test_write_new_writes_a_new_file_and_keeps_one_that_exists(tmp_path):
    write_new(tmp_path / "a.json", "{}")
    assert (tmp_path / "a.json").read_text() == "{}"
    with pytest.raises(OutputError, match="it is kept"):
        write_new(tmp_path / "a.json", "other")
    assert (tmp_path / "a.json").read_text() == "{}" and sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]
