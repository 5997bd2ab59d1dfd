"""What a variant may plug into a trainer, and the registry trainers build them from.

Two places to plug in, following the two papers:

- :class:`UpdateHook` runs around the inner PPO epochs of every update (Outer-PPO: remember
  theta_k before, apply the outer step after). A trainer holds a list of them.
- :class:`BatchSource` decides what the epochs train on (the latest rollout, or HP3O's
  hybrid batches from stored trajectories). A trainer holds exactly one.

Both carry their own checkpoint state: tensors (saved as ``<name>.<key>`` in the
checkpoint's safetensors file) and a JSON value (saved under ``variants.<name>`` in its
``state.json``). Trainers save and restore them generically, so a new variant is a module
plus a :func:`register_hook` call; no trainer changes.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, NamedTuple, Protocol, TypeVar

import torch

from rlkit.core.optim import FlatParameters
from rlkit.variants.options import VariantOptions

R = TypeVar("R", contravariant=True)
B = TypeVar("B", covariant=True)


class VariantState(NamedTuple):
    tensors: dict[str, torch.Tensor]
    """Tensors by key (the trainer prefixes each with the variant's name)."""
    json: Any
    """Anything JSON can hold (None when there is nothing)."""


class UpdateHook(Protocol):
    """Runs around the inner epochs of each update. A hook may also define
    ``schedule(fraction: float)``: the run loop calls it before every update with the inner
    learning rate's fraction of its initial value (Outer-PPO's optional annealing uses it)."""

    name: str

    def begin(self) -> None:
        """Before the inner epochs (the parameters are the rollout policy's)."""

    def end(self) -> dict[str, float]:
        """After the inner epochs; returns scalars to log under the variant's own group."""

    def state(self) -> VariantState: ...

    def load_state(self, state: VariantState) -> None: ...


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


HookFactory = Callable[[VariantOptions, FlatParameters], "UpdateHook | None"]
_HOOKS: dict[str, HookFactory] = {}


def register_hook(name: str, factory: HookFactory) -> None:
    """Every trainer calls ``factory(options, flat)`` and keeps the hook it returns (None: the
    config does not ask for this variant). Registration order is the order hooks run in."""
    _HOOKS[name] = factory


def unregister_hook(name: str) -> None:
    _HOOKS.pop(name, None)


def build_hooks(options: VariantOptions, flat: FlatParameters) -> list[UpdateHook]:
    hooks = (factory(options, flat) for factory in _HOOKS.values())
    return [hook for hook in hooks if hook is not None]


# ------------------------------------------------------------------ checkpoint state
def save_variant_states(parts: list[UpdateHook] | list[Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
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
