"""PPO with an adaptive KL penalty (Schulman et al. 2017, arXiv 1707.06347, §4 and Table 1's
"Adaptive KL" rows).

Each update minimizes the KL-penalized objective of :mod:`rlkit.variants.kl_fixed` with the
current ``beta``; after it, with ``d`` the update's mean KL (``losses/kl``: the analytic
KL[pi_behaviour, pi] averaged over the last epoch's minibatches), ``beta`` is halved if
``d < d_targ / 1.5`` and doubled if ``d > d_targ * 1.5`` (an update hook reading the update's
statistics). ``beta`` is part of the run's checkpoints, so a resumed run continues with the
coefficient it had. Logged: ``kl_adaptive/beta``, the coefficient the update used. The options,
run label, checks and registration are :mod:`rlkit.variants.kl_adaptive_options`.
"""

from __future__ import annotations

import math
from typing import Mapping

from rlkit.variants.base import UpdateHook, VariantState
from rlkit.variants.kl_adaptive_options import KLAdaptiveOptions
from rlkit.variants.kl_fixed import KLPenalty, kl_penalty
from rlkit.variants.registry import Plug, PlugContext


def adapted(beta: float, kl: float, target: float) -> float:
    """The next coefficient: ``beta / 2`` below ``target / 1.5``, ``beta * 2`` above ``target * 1.5``."""
    if kl < target / 1.5:
        return beta / 2
    if kl > target * 1.5:
        return beta * 2
    return beta


class AdaptiveBeta(UpdateHook):
    """After every update, adapts the objective's ``beta`` to the update's mean KL."""

    name = "kl_adaptive"

    def __init__(self, objective: KLPenalty, target: float) -> None:
        self.objective, self.target = objective, float(target)

    def end(self, stats: Mapping[str, float]) -> dict[str, float]:
        used = self.objective.beta
        self.objective.beta = adapted(used, stats["losses/kl"], self.target)
        return {"kl_adaptive/beta": used}

    def state(self) -> VariantState:
        return VariantState({}, {"beta": self.objective.beta})

    def load_state(self, state: VariantState) -> None:
        """Inverse of :meth:`state`: beta is a finite number > 0 (else a ``ValueError``)."""
        beta = state.json.get("beta") if isinstance(state.json, dict) else None
        if not (isinstance(beta, (int, float)) and not isinstance(beta, bool) and math.isfinite(beta) and beta > 0):
            raise ValueError(f"the adaptive KL coefficient beta must be a finite number > 0, got {beta!r}")
        self.objective.beta = float(beta)


def build(options: KLAdaptiveOptions, ctx: PlugContext) -> Plug:
    objective = kl_penalty("kl_adaptive", ctx, options.kl_beta_init)
    return Plug(hooks=(AdaptiveBeta(objective, options.kl_dtarg),), objective=objective)


__all__ = ["AdaptiveBeta", "KLAdaptiveOptions", "adapted", "build"]
