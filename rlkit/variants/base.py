"""What a variant may plug into a trainer (:mod:`rlkit.variants.registry` says how it is registered).

Three places to plug in:

- :class:`UpdateHook` runs around the inner PPO epochs of every update (Outer-PPO: remember
  theta_k before, apply the outer step after; an adaptive KL coefficient: read the update's KL
  after). A trainer holds a list of them.
- :class:`BatchSource` decides what the epochs train on (the latest rollout, or HP3O's
  hybrid batches from stored trajectories). A trainer holds exactly one.
- An objective (:class:`rlkit.core.objective.Objective`, a :class:`rlkit.variants.Plug`'s
  ``objective``) computes each minibatch's loss (PPO's clipped surrogate when no variant brings
  one). A trainer holds exactly one.

All three carry their own checkpoint state: tensors (saved as ``<name>.<key>`` in the
checkpoint's safetensors file) and a JSON value (saved under ``variants.<name>`` in its
``state.json``). Trainers save and restore them generically, so a new variant is a module
plus a registration; no trainer changes.
"""

from __future__ import annotations

import inspect
from typing import Generic, Mapping, Protocol, Sequence, TypeVar

from rlkit.core.parts import PartState, Passes
from rlkit.errors import ConfigError

R = TypeVar("R", contravariant=True)
B = TypeVar("B", covariant=True)


VariantState = PartState
"""A variant's checkpoint state: tensors by key and a JSON value (:class:`rlkit.core.parts.PartState`)."""


class UpdateHook:
    """Runs around the inner epochs of each update. Every callback is a no-op here; a hook
    overrides the ones it needs (Outer-PPO: ``begin``, ``end``, ``schedule`` and its state)."""

    name: str = "hook"

    def begin(self) -> None:
        """Before the inner epochs (the parameters are the rollout policy's)."""

    def end(self, stats: Mapping[str, float]) -> dict[str, float]:
        """After the inner epochs, given the update's statistics (its ``losses/`` scalars: approx_kl,
        clipfrac, the objective's own, ...); returns scalars to log under the variant's own group."""
        return {}

    def schedule(self, fraction: float) -> None:
        """Before every update: the inner learning rate is ``fraction`` of its initial value."""

    def state(self) -> VariantState:
        return VariantState({}, None)

    def load_state(self, state: VariantState) -> None:
        """Restore what :meth:`state` returned."""


def require_end_takes_stats(hooks: Sequence[UpdateHook]) -> None:
    """A one-line :class:`ConfigError` for an update hook whose ``end`` cannot take the update's
    statistics (``def end(self, stats)``)."""
    for hook in hooks:
        try:
            inspect.signature(hook.end).bind({})
        except (TypeError, ValueError):
            name = getattr(hook, "name", type(hook).__name__)
            raise ConfigError(f"update hook {name!r}: end() must take the update's statistics, "
                              "def end(self, stats)") from None


class BatchSource(Protocol, Generic[R, B]):
    """What the inner epochs of an update train on, given the latest rollout ``R``.

    ``batches`` returns the epochs' batch source ``B`` (None: skip this update's epochs, e.g.
    before HP3O has a finished trajectory; :class:`Passes`: several updates) and scalars to log."""

    name: str

    def batches(self, rollout: R, update: int) -> tuple[B | None, dict[str, float]]: ...

    def reset(self) -> None:
        """The environments were reset (unfinished episodes are gone)."""

    def state(self) -> VariantState: ...

    def load_state(self, state: VariantState) -> None: ...


class Stateless:
    """For a batch source with nothing to reset or checkpoint (plain PPO's fresh rollouts)."""

    def reset(self) -> None:
        pass

    def state(self) -> VariantState:
        return VariantState({}, None)

    def load_state(self, state: VariantState) -> None:
        pass


__all__ = ["BatchSource", "Passes", "Stateless", "UpdateHook", "VariantState", "require_end_takes_stats"]
