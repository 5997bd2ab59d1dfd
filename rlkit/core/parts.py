"""Parts a trainer composes that carry their own checkpoint state (a variant's update hooks and
batch source): a name, and tensors plus a JSON value to save and restore.

A part's tensors are saved as ``<name>.<key>`` in a checkpoint's safetensors file and its JSON
under ``variants.<name>`` in its ``state.json``, so trainers save and restore every part the
same way without knowing what it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, Sequence

if TYPE_CHECKING:
    import torch


class PartState(NamedTuple):
    tensors: dict[str, torch.Tensor]
    """Tensors by key (the trainer prefixes each with the part's name)."""
    json: Any
    """Anything JSON can hold (None when there is nothing)."""


class Part(Protocol):
    name: str

    def state(self) -> PartState: ...

    def load_state(self, state: PartState) -> None: ...


def save_part_states(parts: Sequence[Part]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Tensors (``<name>.<key>``) and the ``variants`` JSON of ``parts``."""
    tensors: dict[str, torch.Tensor] = {}
    meta: dict[str, Any] = {}
    for part in parts:
        state = part.state()
        tensors.update({f"{part.name}.{k}": v for k, v in state.tensors.items()})
        if state.json is not None:
            meta[part.name] = state.json
    return tensors, meta


def load_part_states(parts: Sequence[Part], tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Inverse of :func:`save_part_states`."""
    for part in parts:
        prefix = f"{part.name}."
        own = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        part.load_state(PartState(own, meta.get(part.name)))


class Passes(NamedTuple):
    """Several updates after one rollout (HP3O's per-episode schedule): each source is trained as
    an update of its own (all epochs, the hooks around them)."""

    sources: list[Any]
