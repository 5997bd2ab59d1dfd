"""Resumable checkpoints of Gymnasium runs, in the core's format (:mod:`rlkit.io.checkpoint`).

What a checkpoint holds: the model's weights, Adam's state, every variant's state (Outer-PPO's
optimizer, HP3O's stored trajectories), observation and reward normalization, every random stream
(numpy's for acting and HP3O's choices, the minibatch generator), the update and step counters,
training seconds, the recent returns and the evaluation history. Environments restart at each
checkpoint from a seed derived from the update (``EPISODE_RESEED_STRIDE``), so a run resumed from
update k continues exactly as the uninterrupted run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from rlkit.core.normalization import RewardScaler
from rlkit.core.optim import FlatParameters, Optimizer, adam_state, restore_adam_state
from rlkit.errors import ConfigError
from rlkit.gym.config import TrainConfig
from rlkit.gym.episodes import Episodes
from rlkit.io.checkpoint import (find_resume_point, prefixed, refuse_changes, require_state, restoring, run_dir_of,
                                 save_checkpoint, unprefixed)
from rlkit.variants import load_variant_states, save_variant_states
from rlkit.variants.migrate import migrate_config, variant_meta

RESUMABLE = ("total_steps", "checkpoint_every", "eval_every", "eval_episodes", "eval_max_steps", "progress",
             "torch_threads", "device", "async_envs")
"""Fields a resumed run may change (e.g. to extend it); every other field is the run's own."""
REQUIRED_STATE = ("config", "update", "global_step", "train_seconds", "obs_norm", "rew_scaler", "rng_numpy",
                  "recent_returns")


class Checkpointable(Protocol):
    """The parts of a Gymnasium trainer a checkpoint holds."""

    cfg: TrainConfig
    run_dir: Path
    model: nn.Module
    flat: FlatParameters
    optimizer: Optimizer
    generator: torch.Generator
    rng: np.random.Generator
    obs_norm: Any
    rew_scaler: RewardScaler
    episodes: Episodes
    hooks: list[Any]
    source: Any
    updates_done: int
    global_step: int
    seconds: float
    eval_history: list[tuple[int, float, float]]
    eval_seconds: list[float]


def resume_config(path: str, changes: dict[str, object]) -> tuple[TrainConfig, tuple[dict, dict] | None]:
    """The run's own config with ``changes`` applied, and its checkpoint (tensors, state), or None
    when the run never completed one (it then starts again from update 0, in place)."""
    refuse_changes(changes, RESUMABLE)
    found = find_resume_point(path, ("config",))
    if found is None:
        stored = migrate_config(json.loads((run_dir_of(path) / "config.json").read_text()), "gym")
        return TrainConfig.from_dict({**stored, **changes, "resume": path}), None
    tensors, state = found
    if "iteration" in state:
        raise ConfigError(f"{path!r} is an RLHF run; continue it with: rlkit rlhf --resume {path}")
    require_state(path, state, REQUIRED_STATE)
    cfg = TrainConfig.from_dict({**migrate_config(state["config"], "gym"), **changes, "resume": path})
    if cfg.total_steps < int(state["global_step"]):
        raise ConfigError(f"total_steps={cfg.total_steps} is below the {state['global_step']} steps the run has done")
    return cfg, (tensors, state)


def finished_result(run_dir: Path) -> dict | None:
    """The result a finished run wrote (None if it has none, e.g. it was killed in its final evaluation)."""
    try:
        return json.loads((run_dir / "result.json").read_text())
    except (OSError, ValueError):
        return None


def save_gym(trainer: Checkpointable) -> Path:
    tensors = prefixed("model", trainer.model.state_dict())
    tensors.update(prefixed("optim", adam_state(trainer.optimizer, trainer.flat.param)))
    tensors["rng.torch_generator"] = trainer.generator.get_state()
    variant_tensors, variants = save_variant_states([*trainer.hooks, trainer.source])
    tensors.update(variant_tensors)
    state = {"config": trainer.cfg.to_dict(), "update": trainer.updates_done, "global_step": trainer.global_step,
             "train_seconds": trainer.seconds, "obs_norm": trainer.obs_norm.state_dict(),
             "rew_scaler": trainer.rew_scaler.state_dict(), "rng_numpy": trainer.rng.bit_generator.state,
             "recent_returns": list(trainer.episodes.recent), "variants": variants,
             "eval_history": trainer.eval_history, "eval_seconds": trainer.eval_seconds}
    return save_checkpoint(trainer.run_dir, f"update-{trainer.updates_done:07d}", tensors, state)


def load_gym(trainer: Checkpointable, tensors: dict[str, torch.Tensor], state: dict) -> None:
    """Restore weights, optimizer, normalization, random streams, variant state and counters
    (a checkpoint that does not fit this run is a one-line :class:`CheckpointError`)."""
    with restoring(trainer.run_dir):
        model = unprefixed("model", tensors)
        with torch.no_grad():
            for k, v in trainer.model.state_dict().items():
                v.copy_(model[k])  # in place: the flat views stay intact
        restore_adam_state(trainer.optimizer, trainer.flat.param, unprefixed("optim", tensors))
        trainer.generator.set_state(tensors["rng.torch_generator"])
        load_variant_states([*trainer.hooks, trainer.source], tensors, variant_meta(state))
        trainer.rng.bit_generator.state = state["rng_numpy"]
        trainer.obs_norm.load_state_dict(state["obs_norm"])
        trainer.rew_scaler.load_state_dict(state["rew_scaler"])
        trainer.updates_done, trainer.global_step = int(state["update"]), int(state["global_step"])
        trainer.seconds = float(state["train_seconds"])
        trainer.episodes.recent.extend(state["recent_returns"])
        trainer.eval_history = [tuple(e) for e in state.get("eval_history", [])]
        trainer.eval_seconds = list(state.get("eval_seconds", [float("nan")] * len(trainer.eval_history)))
