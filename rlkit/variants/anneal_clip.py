"""PPO's clipped surrogate with its clip range annealed: epsilon is ``--clip-coef`` times the
learning rate's annealing fraction (1 at the first update, ``1/N`` at the last of ``N``), as the
RL Baselines3 Zoo's linear ``clip_range`` schedules (e.g. its RecurrentPPO settings for
CartPoleNoVel-v1, ``lin_0.2``). The value clip (``--clip-vloss``) uses the same range. Logged:
``anneal_clip/clip_coef``, the range the update used. The fraction is set before every update
from the run's progress, so a resumed run continues with the range it would have had. The option,
run label and registration are :mod:`rlkit.variants.anneal_clip_options`.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from rlkit.core.config import PPOConfig
from rlkit.core.objective import CLIPPED_SURROGATE, ObjectiveInputs, ObjectiveTerms
from rlkit.variants.base import UpdateHook
from rlkit.variants.anneal_clip_options import AnnealClipOptions
from rlkit.variants.registry import Plug, PlugContext


class AnnealedClip(UpdateHook):
    """The objective (the clipped surrogate at the annealed range) and the hook that sets the range."""

    name = "anneal_clip"
    is_default = False
    needs_dist_params = False

    def __init__(self) -> None:
        self.fraction = 1.0
        self._hp: tuple[PPOConfig, float, PPOConfig] | None = None

    def schedule(self, fraction: float) -> None:
        self.fraction = float(fraction)

    def end(self, stats: Mapping[str, float]) -> dict[str, float]:
        return {"anneal_clip/clip_coef": self._hp[2].clip_coef if self._hp else float("nan")}

    def annealed(self, hp: PPOConfig) -> PPOConfig:
        """``hp`` with the range of this update (made once per update, not per minibatch)."""
        if self._hp is None or self._hp[0] is not hp or self._hp[1] != self.fraction:
            self._hp = (hp, self.fraction, dataclasses.replace(hp, clip_coef=hp.clip_coef * self.fraction))
        return self._hp[2]

    def __call__(self, inputs: ObjectiveInputs, hp: PPOConfig, dim: int | None = None) -> ObjectiveTerms:
        return CLIPPED_SURROGATE(inputs, self.annealed(hp), dim)


def build(options: AnnealClipOptions, ctx: PlugContext) -> Plug:
    objective = AnnealedClip()
    return Plug(hooks=(objective,), objective=objective)


__all__ = ["AnnealedClip", "AnnealClipOptions", "build"]
