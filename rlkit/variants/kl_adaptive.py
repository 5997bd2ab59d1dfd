"""PPO with an adaptive KL penalty (Schulman et al. 2017, arXiv 1707.06347, §4 and Table 1's
"Adaptive KL" rows).

Each update minimizes the KL-penalized objective of :mod:`rlkit.variants.kl_fixed` with the
current ``beta``; after it, with ``d`` the update's mean KL (``losses/kl``: the analytic
KL[pi_behaviour, pi] averaged over the last epoch's minibatches), ``beta`` is halved if
``d < d_targ / 1.5`` and doubled if ``d > d_targ * 1.5`` (an update hook reading the update's
statistics). ``beta`` is part of the run's checkpoints, so a resumed run continues with the
coefficient it had. Logged: ``kl_adaptive/beta``, the coefficient the update used.
"""

from __future__ import annotations

import math
from typing import Mapping

from rlkit.variants.base import UpdateHook, VariantState
from rlkit.variants.kl_fixed import KLPenalty, kl_penalty, refuse_replayed_batches, require_coefficient
from rlkit.variants.registry import Plug, PlugContext, Variant, register_variant, variant_options


@variant_options
class KLAdaptiveOptions:
    """Adaptive KL penalty (Schulman et al. 2017, §4): flags --kl-adaptive, --kl-dtarg,
    --kl-beta-init; any of them turns it on."""

    kl_adaptive: bool = False
    """Replace the clipped surrogate by mean(r * A - beta * KL[pi_old, pi]), beta adapted after every
    update to keep the KL near --kl-dtarg (categorical and Gaussian policies)."""
    kl_dtarg: float = 0.01
    """The target KL d_targ (> 0): beta halves when the update's mean KL is below d_targ / 1.5 and
    doubles when it is above d_targ * 1.5 (not --target-kl, the early stop any objective may use)."""
    kl_beta_init: float = 1.0
    """The coefficient beta of the first update (> 0)."""

    def validate(self) -> None:
        require_coefficient(self.kl_dtarg, "kl_dtarg (d_targ)", allow_zero=False)
        require_coefficient(self.kl_beta_init, "kl_beta_init (beta)", allow_zero=False)


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


def label(o: KLAdaptiveOptions) -> str:
    """``kladapt-d0.01``, ``kladapt-d0.003-b3`` (a first beta other than 1)."""
    return f"kladapt-d{o.kl_dtarg:g}" + (f"-b{o.kl_beta_init:g}" if o.kl_beta_init != 1 else "")


PRESETS = {"ppo-paper-kladapt": dict(kl_adaptive=True, kl_dtarg=0.01)}
"""Table 1's best adaptive-KL row, d_targ = 0.01 (stack it on an env preset)."""

register_variant(Variant("kl_adaptive", KLAdaptiveOptions, label, builders={"gym": build},
                         checks={"gym": lambda o, cfg: refuse_replayed_batches("kl_adaptive", cfg)},
                         replaces_objective=True, presets=PRESETS))
