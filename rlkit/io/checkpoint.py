"""Checkpoints: safetensors for tensors, JSON for everything else; never pickle.

Layout: ``RUN_DIR/checkpoints/update-000123/{tensors.safetensors,state.json}`` and
``RUN_DIR/checkpoints/latest.json`` pointing at the newest complete one. A checkpoint is
written to a temporary folder and renamed, then the pointer is replaced atomically, so a
kill at any moment leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from rlkit.errors import CheckpointError, ConfigError

LATEST = "latest.json"


def save_checkpoint(run_dir: str | Path, name: str, tensors: dict[str, torch.Tensor], state: dict[str, Any],
                    keep: int = 2) -> Path:
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / name
    tmp = root / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(tmp / "tensors.safetensors"))
    (tmp / "state.json").write_text(json.dumps(state, indent=1))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    pointer = root / f".{LATEST}.tmp"
    pointer.write_text(json.dumps({"checkpoint": name}))
    os.replace(pointer, root / LATEST)
    old = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    for stale in old[:-keep] if keep > 0 else []:
        if stale != final:
            shutil.rmtree(stale, ignore_errors=True)
    return final


def new_run_dir(logdir: str | Path, name: str) -> Path:
    """Create ``logdir/name`` for a new run; refuse one that already has checkpoints (nothing is overwritten)."""
    run_dir = Path(logdir) / name
    if (run_dir / "checkpoints").exists():
        raise ConfigError(f"run directory {str(run_dir)!r} already has checkpoints; "
                          "pass --resume it or choose another --run-name")
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def run_dir_of(path: str | Path) -> Path:
    """``RUN_DIR`` from a run directory, its ``checkpoints`` folder or one checkpoint folder."""
    run_dir = Path(path).resolve()
    while run_dir.name == "checkpoints" or (run_dir / "state.json").is_file():
        run_dir = run_dir.parent
    return run_dir


def resolve_checkpoint(path: str | Path) -> Path:
    """A run directory, its ``checkpoints`` folder, or one checkpoint folder -> that checkpoint."""
    path = Path(path)
    for root in (path / "checkpoints", path):
        pointer = root / LATEST
        if pointer.is_file():
            return root / json.loads(pointer.read_text())["checkpoint"]
    if (path / "state.json").is_file():
        return path
    raise CheckpointError(f"no checkpoint found at {str(path)!r} (expected a run directory with checkpoints/)")


def load_checkpoint(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any], Path]:
    ckpt = resolve_checkpoint(path)
    try:
        tensors = load_file(str(ckpt / "tensors.safetensors"))
        state = json.loads((ckpt / "state.json").read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"unreadable checkpoint {str(ckpt)!r}: {exc}") from exc
    return tensors, state, ckpt
