"""Which implementation of the loss and the optimizer step a trainer uses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from rlkit.core.loss import LossFn, ppo_loss
from rlkit.core.optim import FlatParameters, Optimizer, make_adam
from rlkit.fast.adam import FlatAdam
from rlkit.fast.loss import fused_ppo_loss

KernelChoice = Literal["auto", "plain", "fast"]


@dataclass(frozen=True)
class Kernels:
    """The chosen pieces: ``fast`` says whether the opt-in kernels are used."""

    fast: bool
    loss: LossFn

    def adam(self, flat: FlatParameters, lr: float, eps: float = 1e-5) -> Optimizer:
        """Adam over ``flat``: torch's own, or the direct fused-kernel step."""
        return FlatAdam(flat, lr, eps) if self.fast else make_adam(flat, lr, eps)


def select_kernels(choice: KernelChoice, small_mlp: bool, device: torch.device) -> Kernels:
    """``plain`` and ``fast`` as named; ``auto`` is fast for a small MLP policy in float32 on
    the CPU (per-op cost dominates there) and plain otherwise (language models, CUDA)."""
    fast = choice == "fast" or (choice == "auto" and small_mlp and device.type == "cpu")
    return Kernels(fast, fused_ppo_loss if fast else ppo_loss)
