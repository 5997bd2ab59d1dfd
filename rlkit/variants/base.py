"""What a variant may plug into a trainer (:mod:`rlkit.variants.registry` says how it is registered).

Two places to plug in, following the two papers:

- :class:`UpdateHook` runs around the inner PPO epochs of every update (Outer-PPO: remember
  theta_k before, apply the outer step after). A trainer holds a list of them.
- :class:`BatchSource` decides what the epochs train on (the latest rollout, or HP3O's
  hybrid batches from stored trajectories). A trainer holds exactly one.

Both carry their own checkpoint state: tensors (saved as ``<name>.<key>`` in the
checkpoint's safetensors file) and a JSON value (saved under ``variants.<name>`` in its
``state.json``). Trainers save and restore them generically, so a new variant is a module
plus a registration; no trainer changes.
"""

from __future__ import annotations

from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import torch

R = TypeVar("R", contravariant=True)
B = TypeVar("B", covariant=True)


class VariantState(NamedTuple):
    tensors: dict[str, torch.Tensor]
    """Tensors by key (the trainer prefixes each with the variant's name)."""
    json: Any
    """Anything JSON can hold (None when there is nothing)."""


class UpdateHook:
    """Runs around the inner epochs of each update. Every callback is a no-op here; a hook
    overrides the ones it needs (Outer-PPO: ``begin``, ``end``, ``schedule`` and its state)."""

    name: str = "hook"

    def begin(self) -> None:
        """Before the inner epochs (the parameters are the rollout policy's)."""

    def end(self) -> dict[str, float]:
        """After the inner epochs; returns scalars to log under the variant's own group."""
        return {}

    def schedule(self, fraction: float) -> None:
        """Before every update: the inner learning rate is ``fraction`` of its initial value."""

    def state(self) -> VariantState:
        return VariantState({}, None)

    def load_state(self, state: VariantState) -> None:
        """Restore what :meth:`state` returned."""


class Passes(NamedTuple):
    """Several updates after one rollout (HP3O's per-episode schedule): each source is trained as
    an update of its own (all epochs, the hooks around them)."""

    sources: list[Any]


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


# ------------------------------------------------------------------ checkpoint state
def save_variant_states(parts: list[Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Tensors (``<name>.<key>``) and the ``variants`` JSON of hooks and batch sources."""
    tensors: dict[str, torch.Tensor] = {}
    meta: dict[str, Any] = {}
    for part in parts:
        state = part.state()
        tensors.update({f"{part.name}.{k}": v for k, v in state.tensors.items()})
        if state.json is not None:
            meta[part.name] = state.json
    return tensors, meta


def load_variant_states(parts: list[Any], tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Inverse of :func:`save_variant_states`."""
    for part in parts:
        prefix = f"{part.name}."
        own = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        part.load_state(VariantState(own, meta.get(part.name)))
