"""What both trainers' updates work with, as explicit objects: the learner (parameters,
optimizer, random streams, the variants' hooks and batch source) and the run's progress.

A trainer composes one :class:`Learner` and one :class:`Progress`; the run loop advances the
progress, the learner runs each update's passes with the hooks around them, and both save and
restore their own checkpoint state, so neither trainer repeats it and no trainer object is
passed down to be mutated.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Protocol

import numpy as np
import torch

from rlkit.core.objective import CLIPPED_SURROGATE, Objective
from rlkit.core.optim import FlatParameters, Optimizer, adam_state, restore_adam_state
from rlkit.core.parts import Passes, load_part_states, save_part_states
from rlkit.errors import CheckpointError
from rlkit.io.checkpoint import prefixed, unprefixed

log = logging.getLogger("rlkit")

CUDA_GENERATOR_STATE_BYTES = 16
"""A CUDA (Philox) generator's state: its seed and offset, 8 bytes each."""


class Hook(Protocol):
    """An update hook (:class:`rlkit.variants.base.UpdateHook`): every callback is always there."""

    name: str

    def begin(self) -> None: ...

    def end(self, stats: Mapping[str, float]) -> dict[str, float]: ...

    def schedule(self, fraction: float) -> None: ...

    def state(self) -> Any: ...

    def load_state(self, state: Any) -> None: ...


@dataclass
class Progress:
    """How far a run is: the run loop advances it, every checkpoint holds it."""

    updates_done: int = 0
    env_steps: int = 0
    """Environment steps taken (on the token env, one step is one generated token)."""
    seconds: float = 0.0
    """Seconds spent in updates (rollouts and epochs, not evaluation), across resumes."""

    def to_json(self) -> dict[str, Any]:
        return {"update": self.updates_done, "env_steps": self.env_steps, "seconds": self.seconds}

    @classmethod
    def from_json(cls, state: dict[str, Any]) -> Progress:
        return cls(int(state["update"]), int(state["env_steps"]), float(state["seconds"]))


@dataclass
class Learner:
    """The parameters one PPO update steps and everything it draws on."""

    flat: FlatParameters
    optimizer: Optimizer
    generator: torch.Generator
    """Minibatch shuffling (and token sampling on the token env)."""
    rng: np.random.Generator
    """Acting on Gymnasium envs, and a variant's random choices (HP3O's samples)."""
    hooks: list[Hook] = field(default_factory=list)
    """Run around the inner epochs of every pass, in registration order (Outer-PPO)."""
    source: Any = None
    """The batch source: what the epochs train on (the latest rollout, or HP3O's hybrid batches)."""
    objective: Objective = CLIPPED_SURROGATE
    """The policy objective every minibatch's loss is computed by (a variant's, or PPO's clipped surrogate)."""

    def schedule(self, fraction: float) -> None:
        """Before every update: tell each hook the learning rate's annealing fraction."""
        for hook in self.hooks:
            hook.schedule(fraction)

    def passes(self, selected: Any, optimize: Callable[[Any], dict[str, float]]) -> dict[str, float]:
        """Train on what the batch source selected: one pass, or each of :class:`Passes` as an
        update of its own, with every hook's ``begin`` before and ``end`` after (given the
        update's statistics: the ``losses/`` scalars of ``optimize``); returns the passes' scalars
        averaged."""
        runs = []
        for part in selected.sources if isinstance(selected, Passes) else [selected]:
            for hook in self.hooks:
                hook.begin()
            stats = optimize(part)
            update_stats = MappingProxyType(dict(stats))
            for hook in self.hooks:
                stats.update(hook.end(update_stats))
            runs.append(stats)
        return {key: float(np.mean([r[key] for r in runs])) for key in runs[0]}

    def checkpoint(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """Adam's state, the random streams (the generator, torch's global one, numpy's), the
        hooks', batch source's and objective's state and the objective's name: tensors, and the
        JSON for ``state.json``."""
        tensors = prefixed("optim", adam_state(self.optimizer, self.flat.param))
        tensors["rng.generator"] = self.generator.get_state()
        tensors["rng.torch"] = torch.get_rng_state()
        part_tensors, variants = save_part_states(self.parts())
        tensors.update(part_tensors)
        return tensors, {"rng_numpy": self.rng.bit_generator.state, "variants": variants,
                         "objective": self.objective.name}

    def parts(self) -> list[Any]:
        """What carries checkpoint state of its own: the hooks, the batch source and an objective with state."""
        stateful = callable(getattr(self.objective, "state", None))
        return [*self.hooks, self.source, *([self.objective] if stateful else [])]

    def restore(self, tensors: dict[str, torch.Tensor], state: dict[str, Any]) -> None:
        """Inverse of :meth:`checkpoint` (the parameters themselves are the trainer's to restore);
        a checkpoint of another objective is a one-line :class:`CheckpointError` (one written before
        objectives were recorded was trained with the clipped surrogate)."""
        stored = state.get("objective", CLIPPED_SURROGATE.name)
        if stored != self.objective.name:
            raise CheckpointError(f"the checkpoint was trained with the objective {stored!r}; this run's objective "
                                  f"is {self.objective.name!r}: a run resumes only under its own objective")
        # Adam's state is empty before its first step (HP3O takes none until an episode has finished).
        restore_adam_state(self.optimizer, self.flat.param, unprefixed("optim", tensors))
        restore_generator(self.generator, tensors["rng.generator"])
        if "rng.torch" in tensors:
            torch.set_rng_state(tensors["rng.torch"])
        load_part_states(self.parts(), tensors, state.get("variants", {}))
        self.rng.bit_generator.state = state["rng_numpy"]


def restore_generator(generator: torch.Generator, stored: torch.Tensor) -> None:
    """Set ``generator`` to a stored state. A state saved on another kind of device (a CPU
    Mersenne Twister's 5056 bytes against CUDA's Philox seed and offset) cannot be set: the
    generator is then seeded from a hash of the stored bytes, so resuming the same checkpoint on
    the same device twice draws the same stream, and a warning says the stream is a new one."""
    if stored.dtype != torch.uint8 or stored.dim() != 1:
        raise ValueError(f"the sampling generator's stored state is {stored.dtype} of shape {list(stored.shape)}")
    if stored.numel() == generator.get_state().numel():
        generator.set_state(stored)
        return
    if stored.numel() not in (torch.Generator().get_state().numel(), CUDA_GENERATOR_STATE_BYTES):
        raise ValueError(f"the sampling generator's stored state has {stored.numel()} bytes: neither a CPU's nor "
                         "a CUDA generator's")
    seed = int.from_bytes(hashlib.sha256(stored.cpu().numpy().tobytes()).digest()[:8], "little") >> 1
    generator.manual_seed(seed)
    log.warning("the checkpoint's sampling stream was saved on another kind of device than %s: "
                "it continues from a new stream seeded from the stored one", generator.device)
