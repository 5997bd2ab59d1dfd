"""PPO's clipped surrogate with its clip range annealed: epsilon is ``--clip-coef`` times the
learning rate's annealing fraction (1 at the first update, ``1/N`` at the last of ``N``), as the
RL Baselines3 Zoo's linear ``clip_range`` schedules (e.g. its RecurrentPPO settings for
CartPoleNoVel-v1, ``lin_0.2``). The value clip (``--clip-vloss``) uses the same range. Logged:
``anneal_clip/clip_coef``, the range the update used, and ``losses/annealed_clipfrac``, the share
of ratios outside it. The fraction is set before every update
from the run's progress, so a resumed run continues with the range it would have had. The option,
run label and registration are :mod:`rlkit.variants.anneal_clip_options`.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

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
        return clipped_at(inputs, self.annealed(hp), dim)

    def stack(self, members: Sequence[AnnealedClip]) -> MembersAnnealedClip:
        """The objective of a population whose members are ``members``."""
        return MembersAnnealedClip(list(members))


class MembersAnnealedClip:
    """:class:`AnnealedClip` for ``K`` members at once (``dim=1``). The members train in step, so
    their ranges are equal; a failed member's stops falling (it is no longer scheduled), so the
    smallest is the live members'. Each member's range is recorded for its own ``end()``."""

    name = "anneal_clip"
    is_default = False
    needs_dist_params = False

    def __init__(self, members: list[AnnealedClip]) -> None:
        self.members = members

    def __call__(self, inputs: ObjectiveInputs, hp: PPOConfig, dim: int | None = None) -> ObjectiveTerms:
        live = min((m.annealed(hp) for m in self.members), key=lambda h: h.clip_coef)
        return clipped_at(inputs, live, dim)


def clipped_at(inputs: ObjectiveInputs, hp: PPOConfig, dim: int | None) -> ObjectiveTerms:
    """The clipped surrogate at ``hp.clip_coef``, with ``annealed_clipfrac``: the share of ratios
    outside that range (the core's ``losses/clipfrac`` measures against ``--clip-coef``)."""
    terms = CLIPPED_SURROGATE(inputs, hp, dim)
    outside = ((terms.log_ratio.exp() - 1).abs() > hp.clip_coef).float()
    share = outside.mean() if dim is None else outside.mean(dim)
    return terms._replace(stats={**terms.stats, "annealed_clipfrac": share})


def build(options: AnnealClipOptions, ctx: PlugContext) -> Plug:
    objective = AnnealedClip()
    return Plug(hooks=(objective,), objective=objective)


__all__ = ["AnnealedClip", "AnnealClipOptions", "build"]
