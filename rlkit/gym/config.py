"""Frozen run configuration for PPO on Gymnasium environments, and its presets.

Every field's docstring is the ``--help`` text of ``rlkit train`` (tyro reads them). Related
fields form groups (the environment, the run, evaluation, compute), composed in with the PPO
hyperparameters (:class:`rlkit.core.config.PPOConfig`) and the variants' options groups
(:data:`rlkit.variants.VariantGroups`); ``--help`` shows each as a group, and all of them read,
override and serialize as flat fields (``cfg.clip_coef``, ``--clip-coef``, ``replace(clip_coef=...)``).
Validation raises :class:`rlkit.errors.ConfigError`, a one-line error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Literal

from rlkit.core.composed import NOT_SHOWN, ComposedConfig, flat_field_names, flat_init
from rlkit.core.config import (PPOConfig, checkpoint_cadence, config_group, deferred_validation, require_minibatches,
                               require_positive_int, require_resume_path)
from rlkit.errors import ConfigError
from rlkit.variants import VariantGroups, variant_presets

__all__ = ["ComputeOptions", "ConfigError", "EnvOptions", "EvalOptions", "MemoryOptions", "PRESETS", "RunOptions", "TrainConfig",
           "deferred_validation", "preset"]


@config_group
class EnvOptions:
    """The environment: its id, gymnasium.make's arguments, wrappers and normalization (all kept
    with the run, so --resume and rlkit eval make the same env)."""

    env: str = "CartPole-v1"
    """Gymnasium environment id."""
    env_kwargs: str = ""
    """Keyword arguments for gymnasium.make as a JSON object, e.g. '{"is_slippery": false}'."""
    env_wrappers: str = ""
    """Wrapper stack on every env of the run ('' none; 'atari': no-op starts, frame skip 4, 84x84 gray,
    4 stacked frames, training per life on sign-clipped rewards, evaluation on the game score;
    'minigrid': the 7x7 view flattened for an MLP, mission dropped; 'no-velocity': CartPole, Pendulum,
    LunarLander, MountainCar without the velocities in the observation)."""
    norm_obs: bool = False
    """Normalize observations with running statistics (clipped to +-10), saved in checkpoints."""
    norm_reward: bool = False
    """Scale rewards by the running std of the discounted return (clipped to +-10)."""


@config_group
class RunOptions:
    """Where the run goes and what it keeps: its folder, checkpoints, resume, progress bar."""

    logdir: str = "runs"
    """Directory under which each run gets its own folder."""
    run_name: str | None = None
    """Run folder name (default: {env}__{variant}__s{seed}__{timestamp}, the timestamp as
    YYYYmmdd-HHMMSS; -2, -3, ... appended when that folder exists)."""
    resume: str | None = None
    """Run directory (or checkpoint directory) to continue from, with its own config; --total-steps
    extends it."""
    checkpoint_every: int = 50_000
    """Write a checkpoint every this many environment steps (rounded to whole updates) and at the end."""
    hparams: tuple[str, ...] = ()
    """Config fields TensorBoard's HPARAMS tab shows for the run, after its variant (the full config is
    in its text table and config.json). Empty: its key settings: env, seed, total_steps, learning_rate,
    num_envs, num_steps, its variant's options and every field set away from its default. rlkit train
    sets it to those plus the fields named on its command line; a sweep names env, seed and what
    differs within it."""
    progress: bool = True
    """Show a progress bar when stderr is a terminal."""


@config_group
class EvalOptions:
    """Deterministic evaluation at the end of training and, optionally, during it."""

    eval_episodes: int = 10
    """Episodes of deterministic evaluation at the end of training (0: skip, returns NaN)."""
    eval_every: int = 0
    """Also evaluate (eval_episodes deterministic episodes) every this many env steps during training,
    logged as eval/return_mean (0: only at the end). Outside the timed span; training is unaffected."""
    eval_max_steps: int = 0
    """Cut each evaluation episode after this many steps (0: the env's own time limit, else 10,000);
    cut episodes are counted in eval/capped_episodes."""


@config_group
class MemoryOptions:
    """A recurrent policy: actor and critic each read the observations through a memory torso
    before their MLPs (on images, one torso after the CNN, shared, before linear heads), and updates
    replay whole env sequences from their stored states."""

    memory: str = ""
    """Memory torso: lstm or gru ('' none: a feed-forward policy)."""
    memory_size: int = 64
    """Units of each memory torso."""
    bptt_length: int = 0
    """Steps per sequence an update replays from its stored starting state (back-propagation
    through time): a divisor of num_steps; 0 for whole rollouts (num_steps)."""


@config_group
class ComputeOptions:
    """Where the update runs and how the sub-environments step (the numbers stay those of the
    config; plain and fast kernels agree within rounding)."""

    device: str = "auto"
    """Torch device for the update: auto (cuda when present), cpu or cuda[:i]."""
    torch_threads: int = 1
    """Torch intra-op threads (1 is fastest beside env workers on small machines)."""
    kernels: Literal["auto", "plain", "fast"] = "auto"
    """Kernels: plain (the loss formula with autograd, torch's Adam, the MLP modules), fast (fused
    loss node, direct fused-Adam step and, for an MLP policy, the fused actor-critic MLP; the same
    numbers within rounding) or auto (fast for an MLP policy on the CPU, plain otherwise)."""
    async_envs: bool = False
    """Step sub-environments in subprocesses (AsyncVectorEnv) instead of in-process; in a population
    of two or more, the last K - K // 2 members' envs step in one worker process beside the trainer."""
    env_backend: Literal["gymnasium", "vector", "envpool"] = "gymnasium"
    """How sub-environments step: gymnasium (one env object each, in turn or with --async-envs in
    workers), vector (the env's own vectorized implementation, all in one numpy step: CartPole) or
    envpool (EnvPool's C++ envs of the same id; ALE ids with --env-wrappers atari). Evaluation
    always runs Gymnasium's env."""


@flat_init
@dataclass(frozen=True)
class TrainConfig(ComposedConfig):
    """PPO on a vectorized Gymnasium environment."""

    KEY_HPARAMS: ClassVar[tuple[str, ...]] = ("env", "seed", "total_steps", "learning_rate", "num_envs", "num_steps")

    seed: int = 1
    """Seed for torch, numpy and the environments; equal seeds give bit-identical runs on CPU."""
    total_steps: int = 500_000
    """Total environment steps (summed over all sub-environments; rounded down to whole rollouts)."""
    num_envs: int = 4
    """Number of parallel sub-environments."""
    num_steps: int = 128
    """Rollout length per sub-environment between updates."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the separate actor and critic MLPs."""
    activation: Literal["tanh", "relu"] = "tanh"
    """The activation between the MLPs' hidden layers (the MLP policy's, and those after a memory;
    an image policy keeps its CNN's ReLU)."""
    ortho_init: bool = True
    """Orthogonal initialization (gain sqrt(2) on hidden layers, 0.01 on the policy output, 1 on
    the value output, zero biases; the memory's weights orthogonal too); --no-ortho-init keeps
    PyTorch's default initialization of every layer (Stable-Baselines3's ortho_init=False)."""
    environment: EnvOptions = field(default_factory=EnvOptions)
    run: RunOptions = field(default_factory=RunOptions)
    evaluation: EvalOptions = field(default_factory=EvalOptions)
    recurrent: MemoryOptions = field(default_factory=MemoryOptions)
    compute: ComputeOptions = field(default_factory=ComputeOptions)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """PPO update hyperparameters."""
    variants: VariantGroups = field(default_factory=VariantGroups)
    """Research variants, one options group each (Outer-PPO, HP3O, ...); all off by default."""

    def validate_own(self) -> None:
        for name in ("total_steps", "num_envs", "num_steps", "checkpoint_every", "torch_threads"):
            require_positive_int(self, name)
        require_resume_path(self)
        unknown = [name for name in self.hparams if name not in flat_field_names(TrainConfig)]
        if unknown:
            raise ConfigError(f"hparams names no config field {', '.join(unknown)}")
        for name in ("eval_episodes", "eval_every", "eval_max_steps"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not any(v.replaces_batch for v in self.variants.enabled()):
            require_minibatches(self.batch_size, self.num_minibatches, self.norm_adv, "num_envs*num_steps")
        self.variants.check(self)
        if self.total_steps < self.batch_size:
            raise ConfigError(f"total_steps={self.total_steps} is smaller than one rollout "
                              f"({self.batch_size} steps)")
        self.env_options  # a one-line ConfigError unless a JSON object
        from rlkit.gym.envs import check_backend  # (Gymnasium is imported once a config is checked, not to read one)
        from rlkit.gym.wrappers import check_wrappers

        check_wrappers(self.env_wrappers)
        check_backend(self.env_backend, self.async_envs, self.env_wrappers)
        if not self.hidden_sizes or any(not isinstance(h, int) or h <= 0 for h in self.hidden_sizes):
            raise ConfigError(f"hidden_sizes must be positive, got {self.hidden_sizes}")
        if self.memory:
            from rlkit.gym.memory_check import check_memory

            check_memory(self)

    def showing(self, names: Iterable[str]) -> TrainConfig:
        """This config with ``names`` (the fields a command line set) among what its run's hparams
        show, after its key settings; itself where they are shown already or ``hparams`` is set."""
        shown, named = self.shown_hparams(), set(names) - set(NOT_SHOWN)
        extra = tuple(n for n in flat_field_names(TrainConfig) if n in named and n not in shown)
        if self.hparams or not extra:
            return self
        with deferred_validation():
            return self.replace(hparams=(*shown, *extra))

    @property
    def variant(self) -> str:
        """The variant's short name, the memory appended (``ppo``, ``outer-lr1.5``, ``ppo-lstm64``)."""
        name = self.variants.name
        return f"{name}-{self.memory}{self.memory_size}" if self.memory else name

    @property
    def env_options(self) -> dict[str, Any]:
        """``env_kwargs`` as a dict (``{}`` when empty)."""
        return parse_env_kwargs(self.env_kwargs)

    @property
    def batch_size(self) -> int:
        """Transitions per rollout, num_envs * num_steps."""
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        return self.total_steps // self.batch_size

    @property
    def checkpoint_every_updates(self) -> int:
        """Updates between checkpoints (``checkpoint_every`` env steps, at least one update)."""
        return checkpoint_cadence(self.checkpoint_every, self.batch_size)


def parse_env_kwargs(text: str) -> dict[str, Any]:
    """The JSON object ``text`` (``{}`` for ""); anything else is a one-line :class:`ConfigError`."""
    if not isinstance(text, str):
        raise ConfigError(f"env_kwargs must be a JSON object in a string, e.g. '{{\"is_slippery\": false}}', "
                          f"got {type(text).__name__}")
    if not text.strip():
        return {}
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"env_kwargs is not valid JSON ({type(exc).__name__}): {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"env_kwargs must be a JSON object (keyword arguments for gymnasium.make), got {text[:80]!r}")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different (JSON itself lets the last of two equal keys win)."""
    keys = [k for k, _ in pairs]
    twice = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
    if twice is not None:
        raise ValueError(f"key {twice!r} given twice")
    return dict(pairs)


PRESETS: dict[str, dict[str, object]] = {
    # CleanRL ppo.py classic-control defaults.
    "cartpole": dict(env="CartPole-v1", total_steps=500_000, num_envs=4, num_steps=128,
                     num_minibatches=4, update_epochs=4, learning_rate=2.5e-4, anneal_lr=True,
                     ent_coef=0.01, norm_obs=False, norm_reward=False),
    # PPO paper (Schulman et al. 2017) MuJoCo settings, as in CleanRL ppo_continuous_action.py.
    "mujoco": dict(env="Hopper-v5", total_steps=1_000_000, num_envs=1, num_steps=2048,
                   num_minibatches=32, update_epochs=10, learning_rate=3e-4, anneal_lr=True,
                   ent_coef=0.0, norm_obs=True, norm_reward=True, checkpoint_every=100_000),
    # CleanRL ppo_atari.py (Huang et al. 2022) on Gymnasium's ALE v5 ids (sticky actions 0.25, as
    # Machado et al. 2018 recommend) under the 'atari' wrapper stack; the Nature CNN is chosen by
    # the 4x84x84 frames. 10M steps is the papers' budget (40M frames).
    "atari": dict(env="ALE/Breakout-v5", env_wrappers="atari", total_steps=10_000_000, num_envs=8,
                  num_steps=128, num_minibatches=4, update_epochs=4, learning_rate=2.5e-4, anneal_lr=True,
                  clip_coef=0.1, ent_coef=0.01, norm_obs=False, norm_reward=False, checkpoint_every=500_000,
                  eval_episodes=10),
    # Pgx's MinAtar PPO example (after PureJaxRL): lr 3e-4 held constant, 3 epochs, clip 0.2,
    # entropy 0.01, at a small CPU's scale (8 envs x 128 steps in 4 minibatches, where Pgx runs
    # 4096 envs) and 1M steps; MinAtar's small-grid CNN is chosen by the 10x10 planes.
    "minatar": dict(env="MinAtar/Breakout-v1", total_steps=1_000_000, num_envs=8, num_steps=128,
                    num_minibatches=4, update_epochs=3, learning_rate=3e-4, anneal_lr=False, clip_coef=0.2,
                    ent_coef=0.01, norm_obs=False, norm_reward=False, checkpoint_every=100_000),
    # RL Baselines3 Zoo's tuned PPO for MiniGrid-DoorKey-5x5 (after rl-starter-files): 8 envs x 128
    # steps in minibatches of 64, 10 epochs, lr 2.5e-4 held, no entropy bonus, no value clipping
    # (SB3's default), observations and rewards normalized, 100k steps, on the 'minigrid' stack's
    # flattened view.
    "minigrid": dict(env="MiniGrid-DoorKey-5x5-v0", env_wrappers="minigrid", total_steps=100_000, num_envs=8,
                     num_steps=128, num_minibatches=16, update_epochs=10, learning_rate=2.5e-4, anneal_lr=False,
                     clip_coef=0.2, clip_vloss=False, ent_coef=0.0, norm_obs=True, norm_reward=True,
                     checkpoint_every=50_000),
}


# Variant presets (each variant's module declares its own) set only algorithm fields, so they stack
# on an env preset: ``preset("mujoco", "hp3o")`` or ``rlkit train --preset mujoco hp3o``.
PRESETS.update({"ppo": dict(), **variant_presets()})


ENV_PRESETS = ("cartpole", "mujoco", "atari", "minatar", "minigrid")
"""Presets that choose an environment and its settings; at most one per config."""


def preset(*names: str, **overrides: object) -> TrainConfig:
    """Named presets applied in order, then field overrides, e.g.
    ``preset("mujoco", "outer-nesterov", env="Walker2d-v5")``. At most one env preset."""
    fields: dict[str, object] = {}
    for name in names:
        if not isinstance(name, str) or name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
        fields.update(PRESETS[name])
    envs = [n for n in dict.fromkeys(names) if n in ENV_PRESETS]
    if len(envs) > 1:
        raise ConfigError(f"presets {' and '.join(envs)} both choose an environment; use one env preset "
                          f"({', '.join(ENV_PRESETS)}) plus variant presets and --env")
    return TrainConfig().replace(**{**fields, **overrides})
