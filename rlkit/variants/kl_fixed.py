"""PPO with a fixed KL penalty instead of the clip (Schulman et al. 2017, arXiv 1707.06347, §4 and
Table 1's "Fixed KL" rows).

The policy loss is ``-mean(r * A - beta * KL[pi_behaviour(.|s), pi(.|s)])``: the plain surrogate
(:func:`rlkit.variants.no_clip.surrogate`) plus ``beta`` times the mean analytic KL divergence per
state (the head's ``kl``: categorical and diagonal Gaussian policies; other heads are refused).
The behaviour policy's distribution is computed once per update, by a forward pass before the
first epoch over the update's batch, so the KL is 0 where the policy has not moved yet. The value
loss and the entropy bonus stay the core's (with ``--clip-vloss`` the value loss is still clipped
to ``--clip-coef``). Logged: ``losses/kl``, the mean analytic KL over the last epoch's
minibatches. A batch source that trains on other data than the latest rollout (HP3O) has no
behaviour distribution to compare with and is refused in one line. The options, run label,
checks and registration are :mod:`rlkit.variants.kl_fixed_options`.
"""

from __future__ import annotations

from typing import Sequence

import torch

from rlkit.core.config import PPOConfig
from rlkit.core.heads import PolicyHead, offers_kl
from rlkit.core.objective import ObjectiveInputs, ObjectiveTerms, objective_terms, whitened
from rlkit.errors import ConfigError
from rlkit.variants.kl_fixed_options import KLFixedOptions
from rlkit.variants.no_clip import surrogate
from rlkit.variants.registry import Plug, PlugContext


def penalized_terms(inputs: ObjectiveInputs, hp: PPOConfig, head: PolicyHead, beta: float | torch.Tensor,
                    dim: int | None = None) -> ObjectiveTerms:
    """The KL-penalized objective's terms; ``beta`` a number, or ``[K]`` (each member's own) with ``dim``."""
    log_ratio = inputs.new_log_probs - inputs.old_log_probs
    kl = head.kl(inputs.old_dist, inputs.new_dist)  # type: ignore[attr-defined]
    mean_kl = kl.mean() if dim is None else kl.mean(dim)
    pg_loss = surrogate(log_ratio, whitened(inputs.advantages, hp, dim), dim) + beta * mean_kl
    return objective_terms(pg_loss, log_ratio, inputs, hp, dim, stats={"kl": mean_kl.detach()})


class KLPenalty:
    """The KL-penalized objective with coefficient ``beta`` (an adaptive variant changes it between updates)."""

    is_default = False
    needs_dist_params = True

    def __init__(self, name: str, head: PolicyHead, beta: float) -> None:
        self.name, self.head, self.beta = name, head, float(beta)

    def __call__(self, inputs: ObjectiveInputs, hp: PPOConfig, dim: int | None = None) -> ObjectiveTerms:
        return penalized_terms(inputs, hp, self.head, self.beta, dim)

    def stack(self, members: Sequence[KLPenalty]) -> MembersKLPenalty:
        """The objective of a population whose members are ``members`` (each its own beta)."""
        return MembersKLPenalty(self.name, self.head, list(members))


class MembersKLPenalty:
    """:class:`KLPenalty` for ``K`` members at once (``dim=1``), member k with its own beta."""

    is_default = False
    needs_dist_params = True

    def __init__(self, name: str, head: PolicyHead, members: list[KLPenalty]) -> None:
        self.name, self.head, self.members = name, head, members

    def __call__(self, inputs: ObjectiveInputs, hp: PPOConfig, dim: int | None = None) -> ObjectiveTerms:
        advantages = inputs.advantages
        beta = torch.tensor([m.beta for m in self.members], dtype=advantages.dtype, device=advantages.device)
        return penalized_terms(inputs, hp, self.head, beta, dim)


def kl_penalty(name: str, ctx: PlugContext, beta: float) -> KLPenalty:
    """The penalty objective for the trainer of ``ctx``; a head without the analytic KL is one line."""
    head = getattr(ctx.model, "head", None)
    if not offers_kl(head):
        raise ConfigError(f"variant {name} needs the analytic KL of the policy's distribution, which the "
                          f"{type(head).__name__} head does not offer (categorical and diagonal Gaussian "
                          "policies do)")
    return KLPenalty(name, head, beta)  # type: ignore[arg-type]


def build(options: KLFixedOptions, ctx: PlugContext) -> Plug:
    return Plug(objective=kl_penalty("kl_fixed", ctx, options.kl_beta))


__all__ = ["KLFixedOptions", "KLPenalty", "MembersKLPenalty", "build", "kl_penalty", "penalized_terms"]
