"""Torch device selection."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlkit.errors import ConfigError

if TYPE_CHECKING:
    import torch


def torch_device(name: str) -> torch.device:
    """``auto`` is CUDA when present, else the CPU; any other name as torch reads it."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def check_device(name: str) -> None:
    """One-line :class:`ConfigError` for a device name torch cannot parse or this machine lacks."""
    if name in ("auto", "cpu"):  # (a config names these without starting torch)
        return
    import torch

    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ConfigError(f"device {name!r} is not a torch device (auto, cpu, cuda, cuda:N)") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device {name!r}: this torch build or machine has no CUDA device (use cpu or auto)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"device {name!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    elif device.type != "cpu":
        raise ConfigError(f"device {name!r} is not supported; use auto, cpu or cuda[:N]")
