"""Resumable checkpoints of RLHF runs, in the core's format (:mod:`rlkit.io.checkpoint`).

What a checkpoint holds: the trainable parameters as the one flat vector the optimizer steps
(all weights, or the LoRA adapters, plus the value head / critic), the learner's state (Adam's
moments, the sampling/minibatch generator, torch's and numpy's streams, every variant's state:
Outer-PPO's optimizer, HP3O's stored responses), the progress (iteration, tokens, seconds), the
adaptive-KL beta, each sub-env's prompt stream and the per-iteration history. Frozen weights (the
reference, a frozen base under LoRA) are not copied: they are rebuilt from ``config.policy``
exactly as the first run built them. A run resumed from iteration k therefore continues exactly
as the uninterrupted run (tested with a tiny model).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

import torch

from rlkit.core.learner import Learner, Progress
from rlkit.errors import ConfigError
from rlkit.io.checkpoint import checkpoint_tensors, restoring, save_checkpoint
from rlkit.rlhf.config import RLHFConfig
from rlkit.rlhf.kl import AdaptiveKL
from rlkit.variants.migrate import StoredRun, config_of, read_run

log = logging.getLogger("rlkit")

RESUMABLE = ("iterations", "checkpoint_every", "save_model", "progress", "torch_threads", "device", "policy", "reward_model",
             "prompts", "reward")
"""Fields a resumed RLHF run may change: extend it, or point at models, prompts and reward functions
that moved (a reward function that failed is fixed in place and the run resumed)."""
REQUIRED_STATE = ("kl_beta", "env_rngs", "history")
"""What an RLHF checkpoint holds beside every checkpoint's keys (:data:`rlkit.variants.migrate.REQUIRED_STATE`)."""


class RLHFParts(NamedTuple):
    """What an RLHF checkpoint holds beside the learner and the progress."""

    envs: list[Any]
    """The token envs (their prompt streams)."""
    kl: AdaptiveKL
    history: list[dict[str, float]]
    """Every iteration's logged scalars."""


def config_from_checkpoint(path: str, changes: dict[str, Any] | None = None) -> tuple[RLHFConfig, StoredRun]:
    """The run's config (with ``resume=path`` and the :data:`RESUMABLE` ``changes``) and what it
    stored, less its tensors: :func:`load_rlhf` reads them again once the model is built, so a
    resume never holds the checkpoint's weights and Adam moments beside a model being loaded."""
    stored = read_run(path, "rlhf", changes or {}, RESUMABLE, REQUIRED_STATE, RLHFConfig().to_dict())
    cfg = config_of(RLHFConfig, stored, changes or {}, path)
    before, now = stored.state["config"] if stored.state else stored.record, cfg.to_dict()
    for name in ("reward", "prompts"):
        old, new = (list(v) if isinstance(v, (list, tuple)) else v for v in (before.get(name), now.get(name)))
        if name in (changes or {}) and name in before and old != new:
            log.warning("resuming with %s = %s (the run had %s): its checkpoints record it; config.json keeps "
                        "the run's first settings", name, new, old)
    done = int(stored.state["update"]) if stored.state else 0
    if cfg.iterations < done:
        raise ConfigError(f"iterations={cfg.iterations} is below the {done} the run has done")
    return cfg, stored._replace(tensors=None)


def save_rlhf(run_dir: Path, cfg: RLHFConfig, learner: Learner, progress: Progress, parts: RLHFParts) -> Path:
    tensors, learner_state = learner.checkpoint()
    tensors["flat"] = learner.flat.data
    state = {"config": {**cfg.to_dict(), "resume": None}, "trainer": "rlhf", **progress.to_json(), **learner_state,
             "kl_beta": parts.kl.beta, "env_rngs": [env.np_random.bit_generator.state for env in parts.envs],
             "history": parts.history}
    return save_checkpoint(run_dir, f"iteration-{progress.updates_done:06d}", tensors, state)


def load_rlhf(run_dir: Path, stored: StoredRun, learner: Learner, parts: RLHFParts) -> Progress:
    """Restore ``learner`` and ``parts`` from ``stored`` and return the run's progress (a checkpoint
    that does not fit is a one-line :class:`CheckpointError`). Tensors ``stored`` does not hold are
    read from its checkpoint folder in two parts: the parameters, copied in and dropped, then the
    rest (Adam's moments), so a resume never holds the parameters twice beside the moments."""
    state = stored.state
    assert state is not None
    with _tensor_reader(stored) as read:
        flat = read(lambda k: k == "flat")
        with restoring(run_dir):
            _copy_parameters(learner, flat["flat"])
        del flat
        rest = read(lambda k: k != "flat")
    with restoring(run_dir):
        learner.restore(rest, state)
        for env, rng_state in zip(parts.envs, state["env_rngs"]):
            env.np_random.bit_generator.state = rng_state
        parts.kl.beta = float(state["kl_beta"])
        parts.history[:] = list(state["history"])
        return Progress.from_json(state)


@contextlib.contextmanager
def _tensor_reader(stored: StoredRun) -> Iterator[Callable[[Callable[[str], bool]], dict[str, torch.Tensor]]]:
    """``read(keep)``: the tensors of ``stored`` whose names ``keep`` accepts (from its checkpoint
    folder, through one open file, when it holds none itself)."""
    if stored.tensors is not None:
        held = stored.tensors
        yield lambda keep: {k: v for k, v in held.items() if keep(k)}
        return
    assert stored.checkpoint is not None, "a stored run holds its tensors or names its checkpoint"
    with checkpoint_tensors(stored.checkpoint) as read:
        yield read


def _copy_parameters(learner: Learner, flat: torch.Tensor) -> None:
    """The stored parameter vector into the learner's: another shape or dtype, or a non-finite
    value, is refused (another run's checkpoint, or a damaged one)."""
    own = learner.flat.data
    if flat.shape != own.shape or flat.dtype != own.dtype:
        raise ConfigError(f"checkpoint holds {flat.dtype} trainable parameters of shape {list(flat.shape)}, this "
                          f"model has {own.dtype} of shape {list(own.shape)}: not the run's policy")
    if not bool(torch.isfinite(flat).all()):
        raise ValueError("the checkpoint's trainable parameters hold non-finite values")
    with torch.no_grad():
        own.copy_(flat)


@dataclass(frozen=True)
class RandomStreams:
    """The random streams an iteration's rollout advances (sampling, prompt draws): taken before it,
    so a rollout that fails part-way can be undone and the run checkpointed as it stood."""

    generator: torch.Tensor
    torch_global: torch.Tensor
    numpy: dict[str, Any]
    envs: list[dict[str, Any]]

    @classmethod
    def take(cls, learner: Learner, envs: list[Any]) -> "RandomStreams":
        return cls(learner.generator.get_state(), torch.get_rng_state(), learner.rng.bit_generator.state,
                   [env.np_random.bit_generator.state for env in envs])

    def restore(self, learner: Learner, envs: list[Any]) -> None:
        learner.generator.set_state(self.generator)
        torch.set_rng_state(self.torch_global)
        learner.rng.bit_generator.state = self.numpy
        for env, state in zip(envs, self.envs):
            env.np_random.bit_generator.state = state
