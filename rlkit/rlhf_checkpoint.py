"""Resumable checkpoints of RLHF runs (issue #4), in the core's format (rlkit/checkpoint.py).

What a checkpoint holds: the trainable parameters as the one flat vector the optimizer
steps (all weights, or the LoRA adapters, plus the value head / critic), Adam's state, the
adaptive-KL beta, the Outer-PPO state, HP3O's stored responses, every random stream (the
sampling/minibatch generator, torch's global one, numpy's, each sub-env's prompt stream),
the iteration and the per-iteration history. Frozen weights (the reference, a frozen base
under LoRA) are not copied: they are rebuilt from ``config.policy`` exactly as the first
run built them. A run resumed from iteration k therefore continues exactly as the
uninterrupted run (tested with a tiny model).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from rlkit.checkpoint import load_checkpoint, save_checkpoint
from rlkit.rlhf_config import ConfigError, RLHFConfig
from rlkit.token_grid import SequenceRecord

if TYPE_CHECKING:
    from rlkit.rlhf import RLHFTrainer

_RECORD_TENSORS = ("prompt", "actions", "log_probs", "values", "rewards")


def config_from_checkpoint(path: str) -> tuple[RLHFConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """The run's config (with ``resume=path``), tensors and JSON state."""
    tensors, state, _ = load_checkpoint(path)
    if "iteration" not in state:
        raise ConfigError(f"{path!r} is not an rlkit RLHF checkpoint")
    return RLHFConfig.from_dict({**state["config"], "resume": path}), tensors, state


def save_rlhf(trainer: "RLHFTrainer", history: list[dict[str, float]], tokens: float, seconds: float) -> Path:
    tensors: dict[str, torch.Tensor] = {"flat": trainer.flat.data}
    opt_state = trainer.optimizer.state.get(trainer.flat.param, {})
    tensors.update({f"optim.{k}": v for k, v in opt_state.items() if torch.is_tensor(v)})
    tensors["rng.generator"] = trainer.generator.get_state()
    tensors["rng.torch"] = torch.get_rng_state()
    if trainer.outer:
        tensors.update(trainer.outer.state_tensors())
    records: list[dict[str, object]] = []
    for i, rec in enumerate(trainer.hp3o.items if trainer.hp3o is not None else []):
        tensors.update({f"hp3o.{i}.{k}": getattr(rec, k) for k in _RECORD_TENSORS})
        records.append({f.name: getattr(rec, f.name) for f in dataclasses.fields(SequenceRecord)
                        if f.name not in _RECORD_TENSORS})
    state = {"config": {**trainer.cfg.to_dict(), "resume": None}, "iteration": trainer.iteration,
             "kl_beta": trainer.kl.beta, "rng_numpy": trainer.rng.bit_generator.state,
             "env_rngs": [env.np_random.bit_generator.state for env in trainer.envs], "hp3o": records,
             "history": history, "tokens": tokens, "seconds": seconds}
    return save_checkpoint(trainer.run_dir, f"iteration-{trainer.iteration:06d}", tensors, state)


def load_rlhf(trainer: "RLHFTrainer", tensors: dict[str, torch.Tensor],
              state: dict[str, Any]) -> tuple[list[dict[str, float]], float, float]:
    """Restore ``trainer`` in place; returns (history, tokens, seconds) so far."""
    flat = tensors["flat"]
    if flat.shape != trainer.flat.data.shape:
        raise ConfigError(f"checkpoint holds {flat.numel()} trainable parameters, this model has "
                          f"{trainer.flat.data.numel()}: not the run's policy")
    device = trainer.flat.data.device
    with torch.no_grad():
        trainer.flat.data.copy_(flat)
    trainer.optimizer.restore_state({k[len("optim."):]: v for k, v in tensors.items() if k.startswith("optim.")})
    trainer.generator.set_state(tensors["rng.generator"])
    torch.set_rng_state(tensors["rng.torch"])
    if trainer.outer:
        trainer.outer.load_state_tensors(tensors)
    if trainer.hp3o is not None:
        trainer.hp3o.items.clear()
        trainer.hp3o.add([SequenceRecord(**{k: tensors[f"hp3o.{i}.{k}"].to(device) for k in _RECORD_TENSORS}, **meta)
                          for i, meta in enumerate(state["hp3o"])])
    trainer.rng.bit_generator.state = state["rng_numpy"]
    for env, rng_state in zip(trainer.envs, state["env_rngs"]):
        env.np_random.bit_generator.state = rng_state
    trainer.kl.beta = float(state["kl_beta"])
    trainer.iteration = int(state["iteration"])
    return list(state["history"]), float(state["tokens"]), float(state["seconds"])
