"""Resumable checkpoints of RLHF runs, in the core's format (:mod:`rlkit.io.checkpoint`).

What a checkpoint holds: the trainable parameters as the one flat vector the optimizer
steps (all weights, or the LoRA adapters, plus the value head / critic), Adam's state, the
adaptive-KL beta, every variant's state (Outer-PPO's optimizer, HP3O's stored responses),
every random stream (the sampling/minibatch generator, torch's global one, numpy's, each
sub-env's prompt stream), the iteration and the per-iteration history. Frozen weights (the
reference, a frozen base under LoRA) are not copied: they are rebuilt from ``config.policy``
exactly as the first run built them. A run resumed from iteration k therefore continues
exactly as the uninterrupted run (tested with a tiny model).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from rlkit.core.optim import FlatParameters, Optimizer, adam_state, restore_adam_state
from rlkit.errors import ConfigError
from rlkit.io.checkpoint import (load_checkpoint, prefixed, refuse_changes, require_state, restoring, save_checkpoint,
                                 unprefixed)
from rlkit.rlhf.config import RLHFConfig
from rlkit.rlhf.kl import AdaptiveKL
from rlkit.variants import load_variant_states, save_variant_states
from rlkit.variants.migrate import migrate_config, variant_meta


class Checkpointable(Protocol):
    """The parts of an RLHF trainer a checkpoint holds."""

    cfg: RLHFConfig
    run_dir: Path
    flat: FlatParameters
    optimizer: Optimizer
    generator: torch.Generator
    rng: np.random.Generator
    envs: list[Any]
    kl: AdaptiveKL
    hooks: list[Any]
    source: Any
    updates_done: int
    history: list[dict[str, float]]
    tokens: float
    seconds: float


RESUMABLE = ("iterations", "checkpoint_every", "save_model", "torch_threads", "device", "policy", "reward_model",
             "prompts")
"""Fields a resumed RLHF run may change: extend it, or point at models and prompts that moved."""
REQUIRED_STATE = ("config", "iteration", "kl_beta", "rng_numpy", "env_rngs", "history", "tokens", "seconds")


def config_from_checkpoint(path: str, changes: dict[str, Any] | None = None
                           ) -> tuple[RLHFConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """The run's config (with ``resume=path`` and the :data:`RESUMABLE` ``changes``), tensors and JSON state."""
    changes = changes or {}
    refuse_changes(changes, RESUMABLE)
    tensors, state, _ = load_checkpoint(path, ("config",))
    if "iteration" not in state:
        kind = "a Gymnasium run; continue it with: rlkit train --resume" if "global_step" in state else "not an RLHF run:"
        raise ConfigError(f"{path!r} is {kind} {path}")
    require_state(path, state, REQUIRED_STATE)
    cfg = RLHFConfig.from_dict({**migrate_config(state["config"], "rlhf"), **changes, "resume": path})
    if cfg.iterations < int(state["iteration"]):
        raise ConfigError(f"iterations={cfg.iterations} is below the {state['iteration']} the run has done")
    return cfg, tensors, state


def save_rlhf(trainer: Checkpointable) -> Path:
    tensors: dict[str, torch.Tensor] = {"flat": trainer.flat.data}
    tensors.update(prefixed("optim", adam_state(trainer.optimizer, trainer.flat.param)))
    tensors["rng.generator"] = trainer.generator.get_state()
    tensors["rng.torch"] = torch.get_rng_state()
    variant_tensors, variant_meta = save_variant_states([*trainer.hooks, trainer.source])
    tensors.update(variant_tensors)
    state = {"config": {**trainer.cfg.to_dict(), "resume": None}, "iteration": trainer.updates_done,
             "kl_beta": trainer.kl.beta, "rng_numpy": trainer.rng.bit_generator.state,
             "env_rngs": [env.np_random.bit_generator.state for env in trainer.envs], "variants": variant_meta,
             "history": trainer.history, "tokens": trainer.tokens, "seconds": trainer.seconds}
    return save_checkpoint(trainer.run_dir, f"iteration-{trainer.updates_done:06d}", tensors, state)


def load_rlhf(trainer: Checkpointable, tensors: dict[str, torch.Tensor], state: dict[str, Any]) -> None:
    """Restore ``trainer`` in place (a checkpoint that does not fit is a one-line :class:`CheckpointError`)."""
    with restoring(trainer.run_dir):
        _restore(trainer, tensors, state)


def _restore(trainer: Checkpointable, tensors: dict[str, torch.Tensor], state: dict[str, Any]) -> None:
    flat = tensors["flat"]
    if flat.shape != trainer.flat.data.shape:
        raise ConfigError(f"checkpoint holds {flat.numel()} trainable parameters, this model has "
                          f"{trainer.flat.data.numel()}: not the run's policy")
    with torch.no_grad():
        trainer.flat.data.copy_(flat)
    restore_adam_state(trainer.optimizer, trainer.flat.param, unprefixed("optim", tensors))
    trainer.generator.set_state(tensors["rng.generator"])
    torch.set_rng_state(tensors["rng.torch"])
    load_variant_states([*trainer.hooks, trainer.source], tensors, variant_meta(state))
    trainer.rng.bit_generator.state = state["rng_numpy"]
    for env, rng_state in zip(trainer.envs, state["env_rngs"]):
        env.np_random.bit_generator.state = rng_state
    trainer.kl.beta = float(state["kl_beta"])
    trainer.updates_done = int(state["iteration"])
    trainer.history = list(state["history"])
    trainer.tokens, trainer.seconds = float(state["tokens"]), float(state["seconds"])
