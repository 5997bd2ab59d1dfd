"""Which implementation of the loss, the optimizer step and the MLP forward a trainer uses."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

import torch

from rlkit.core.loss import LossFn, ppo_loss
from rlkit.core.objective import Objective
from rlkit.core.optim import FlatParameters, Optimizer, make_adam
from rlkit.fast.adam import FlatAdam
from rlkit.fast.loss import fused_ppo_loss
from rlkit.fast.mlp import ActorCriticMLP, install_fused_forward

KernelChoice = Literal["auto", "plain", "fast"]
log = logging.getLogger("rlkit")


@dataclass(frozen=True)
class Kernels:
    """The chosen pieces. With ``fast`` the loss of the default objective is
    :func:`rlkit.fast.loss.fused_ppo_loss` and :meth:`adam` steps through
    :class:`rlkit.fast.adam.FlatAdam`; otherwise both are plain. Another objective is computed by
    itself through autograd whatever the choice (:func:`rlkit.core.objective.minibatch_loss`)."""

    fast: bool
    """Whether the fused loss and the direct fused-Adam step are used."""
    loss: LossFn
    fused_mlp: bool
    """Whether :meth:`prepare` installs the fused actor-critic MLP (fast, on an MLP policy)."""
    chosen: KernelChoice = "auto"
    """What was asked for."""

    def adam(self, flat: FlatParameters, lr: float, eps: float = 1e-5) -> Optimizer:
        """Adam over ``flat``: torch's own, or the direct fused-kernel step."""
        return FlatAdam(flat, lr, eps) if self.fast else make_adam(flat, lr, eps)

    def announce(self, objective: Objective) -> None:
        """Say that the fused loss does not compute ``objective`` (it computes the default one only):
        ``objective`` runs through autograd, the fused MLP and Adam step still in use. A warning
        when ``fast`` was asked for by name, else an info line."""
        if self.fast and not objective.is_default:
            log.log(logging.WARNING if self.chosen == "fast" else logging.INFO,
                    "objective %s runs through autograd: the fused loss kernel computes PPO's clipped surrogate "
                    "only (the fused MLP and Adam step still apply)", objective.name)

    def prepare(self, model: ActorCriticMLP, flat: FlatParameters) -> None:
        """Wire the chosen kernels into ``model``, whose parameters ``flat`` holds: with
        ``fused_mlp`` its forward becomes the one-node MLP of :mod:`rlkit.fast.mlp`; otherwise the
        model is left exactly as built (its modules' forward)."""
        if self.fused_mlp:
            install_fused_forward(model, flat)


def select_kernels(choice: KernelChoice, small_mlp: bool, device: torch.device) -> Kernels:
    """``plain`` and ``fast`` as named; ``auto`` is ``fast`` when ``small_mlp`` (the gym trainer's
    MLP policy) and ``device`` is the CPU, where per-op cost dominates a PPO step, and ``plain``
    otherwise (the language-model trainer, CUDA and any other device). The fused MLP comes with
    ``fast`` on an MLP policy only."""
    fast = choice == "fast" or (choice == "auto" and small_mlp and device.type == "cpu")
    return Kernels(fast, fused_ppo_loss if fast else ppo_loss, fused_mlp=fast and small_mlp, chosen=choice)
