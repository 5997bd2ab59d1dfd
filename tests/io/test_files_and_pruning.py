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


def test_weights_get_the_umasks_mode_and_a_refused_mode_change_keeps_the_file(tmp_path, monkeypatch):
    import os
    import stat

    from rlkit.io.checkpoint import load_file, save_file

    old = os.umask(0o027)
    try:
        save_file({"w": torch.ones(2)}, str(tmp_path / "a.safetensors"))
        assert stat.S_IMODE((tmp_path / "a.safetensors").stat().st_mode) == 0o640  # read at each write, not cached
    finally:
        os.umask(old)

    def refused(path, mode):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "chmod", refused)
    save_file({"w": torch.ones(2)}, str(tmp_path / "b.safetensors"))  # a file system that keeps its own modes
    assert torch.equal(load_file(str(tmp_path / "b.safetensors"))["w"], torch.ones(2))


def test_a_tensor_kept_from_a_checkpoint_holds_no_other_tensors_pages(tmp_path):
    """Restoring copies the parameters in and keeps Adam's moments: the parameters' loaded tensor,
    once dropped, leaves nothing resident. (A mapped file stayed mapped while any tensor read from it
    lived, so a resumed run kept the parameters' pages besides: +0.54 GB for SmolLM2-135M.)"""
    import subprocess
    import sys

    from rlkit.io.checkpoint import save_file

    n = 16 * 2**20
    save_file({"flat": torch.ones(n), "m": torch.ones(n)}, str(tmp_path / "t.safetensors"))  # 64 MB each
    code = ("import re, torch\n"
            "from rlkit.io.checkpoint import load_file\n"
            "def file_pages():\n"
            "    return int(re.search(r'RssFile:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) / 1024\n"
            "before = file_pages()\n"
            f"t = load_file({str(tmp_path / 't.safetensors')!r})\n"
            f"x = torch.empty({n}); x.copy_(t.pop('flat'))\n"
            "m = t.pop('m'); m.add_(1.0)\n"
            "print(file_pages() - before)\n")
    grown = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                 timeout=120).stdout)
    assert grown < 16, grown  # MB of file pages still mapped: not the dropped 64 MB tensor's
