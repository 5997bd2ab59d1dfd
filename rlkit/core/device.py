"""Torch device selection."""

from __future__ import annotations

import torch


def torch_device(name: str) -> torch.device:
    """``auto`` is CUDA when present, else the CPU; any other name as torch reads it."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)
