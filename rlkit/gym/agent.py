"""A trained agent: policy + frozen observation normalization, loadable from a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlkit.core.encoders import ObsEncoder, encode_items, make_encoder
from rlkit.core.heads import make_head
from rlkit.core.normalization import ObsNormalizer
from rlkit.errors import CheckpointError, ConfigError, ObservationError, UnsupportedSpaceError
from rlkit.gym.config import TrainConfig
from rlkit.gym.cnn import CNNActorCritic
from rlkit.gym.envs import close_envs, env_gives_masks, make_env
from rlkit.gym.evaluation import EvalResult, run_episodes
from rlkit.gym.masking import MaskedActorCritic, check_mask
from rlkit.gym.policies import MLPActorCritic, default_init
from rlkit.gym.recurrent_cnn import RecurrentCNNActorCritic
from rlkit.gym.recurrent_policy import RecurrentActorCritic
from rlkit.io.checkpoint import load_checkpoint, require_state, restore_weights, restoring, unprefixed
from rlkit.variants.migrate import require_known_options


class Agent:
    """Acts with the trained policy; normalization statistics are frozen."""

    def __init__(self, model: MLPActorCritic | CNNActorCritic | MaskedActorCritic | RecurrentActorCritic |
                 RecurrentCNNActorCritic,
                 obs_norm: ObsNormalizer, encoder: ObsEncoder) -> None:
        self.model, self.obs_norm, self.encoder = model, obs_norm, encoder
        self.recurrent = isinstance(model, (RecurrentActorCritic, RecurrentCNNActorCritic))
        """The policy has memory: :meth:`act` carries its state from call to call (see :meth:`start_episode`)."""
        self.state: np.ndarray | None = None
        """A recurrent policy's ``[N, 2 S]`` state after the latest :meth:`act` (None: at an episode's start)."""
        self.masked = isinstance(model, MaskedActorCritic)
        """The policy reads action masks (see :mod:`rlkit.gym.masking`)."""
        self.obs_shape = encoder.space.shape if isinstance(encoder.space, gym.spaces.Box) else None
        """A Box observation's shape (None for other spaces)."""
        self.actor = model.snapshot()

    def act(self, obs: Any, deterministic: bool = True, rng: np.random.Generator | None = None,
            action_mask: Any = None) -> np.ndarray:
        """Env-ready action(s) for one observation or a batch: ``[N, *obs_shape]`` for a Box space,
        a list of observations for any other. ``action_mask``: ``[A]`` or ``[N, A]`` booleans for a
        policy trained with masks (None: every action allowed)."""
        x, single = self.inputs(obs, action_mask)
        if self.recurrent:
            return self._act_in_state(x, single, deterministic, rng)
        if deterministic:
            actions = self.actor.mode(x)
        else:
            actions = self.actor.act(x, rng if rng is not None else np.random.default_rng()).actions
        actions = self.model.head.to_env(actions)
        return actions[0] if single else actions

    def start_episode(self) -> None:
        """A recurrent policy's next :meth:`act` starts an episode (its state is zeroed)."""
        self.state = None

    def _act_in_state(self, x: np.ndarray, single: bool, deterministic: bool,
                      rng: np.random.Generator | None) -> np.ndarray:
        """:meth:`act` of a recurrent policy: in the state the previous call left (zeros at an
        episode's start, or when the number of observations changed)."""
        state = self.state if self.state is not None and len(self.state) == len(x) else \
            self.model.initial_state(len(x))  # type: ignore[union-attr]
        if deterministic:
            actions, self.state = self.actor.mode(x, state)
        else:
            step = self.actor.act(x, state, rng if rng is not None else np.random.default_rng())
            actions, self.state = step.act.actions, step.state
        actions = self.model.head.to_env(actions)
        return actions[0] if single else actions

    def inputs(self, obs: Any, action_mask: Any = None) -> tuple[np.ndarray, bool]:
        """What the actor reads for ``obs`` (as :meth:`act` takes it): ``([N, in_dim]`` encoded,
        checked finite, normalized with the frozen statistics, masks appended``, whether obs was one
        observation)``; a bad observation is a one-line ObservationError."""
        batch, single = self._encode(obs)
        if not np.isfinite(batch).all():
            raise ObservationError("observation contains NaN or inf")
        x = self.obs_norm(batch, update=False)
        if self.masked:
            x = np.concatenate([x, self._mask(action_mask, len(x)).astype(x.dtype)], axis=1)
        return x, single

    def _mask(self, action_mask: Any, n: int) -> np.ndarray:
        """``[n, A]`` bool masks (all allowed when None), or a one-line ObservationError."""
        size = self.model.n  # type: ignore[union-attr]
        try:
            mask = np.ones((n, size), bool) if action_mask is None else check_mask(action_mask, size)
            return np.broadcast_to(mask, (n, size))
        except ValueError as exc:
            raise ObservationError(str(exc)) from None

    def _encode(self, obs: Any) -> tuple[np.ndarray, bool]:
        """``([N, dim] encoded, whether obs was one observation)``, or a one-line ObservationError."""
        if obs is None:
            raise ObservationError("observation is None")
        if self.obs_shape is None:
            space = self.encoder.space
            items = [obs] if space.contains(obs) else list(obs) if isinstance(obs, (list, tuple)) else None
            if not items or not all(space.contains(x) for x in items):
                raise ObservationError(f"observation {str(obs)[:80]!r} is not in {space} (nor a list of such)")
            return encode_items(self.encoder, items), len(items) == 1 and items[0] is obs
        try:
            obs = np.asarray(obs, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ObservationError(f"observation is not numeric: {exc}") from None
        single = obs.shape == self.obs_shape
        if not single and obs.shape[1:] != self.obs_shape:
            raise ObservationError(f"observation of shape {obs.shape}; this agent takes {self.obs_shape} or a batch "
                                   f"[N, {', '.join(map(str, self.obs_shape))}]")
        n = 1 if single else obs.shape[0]
        return self.encoder.batch(obs.reshape(n, *self.obs_shape), n), single

    def evaluate(self, env_id: str, episodes: int, seed: int = 0, max_steps: int | None = None,
                 progress: bool = False, env_kwargs: dict[str, Any] | None = None, wrappers: str = "") -> EvalResult:
        """Deterministic returns over ``episodes`` episodes (see :func:`run_episodes`)."""
        return run_episodes(self.act, env_id, episodes, seed, max_steps, progress, env_kwargs, self.masked, wrappers,
                            self.start_episode if self.recurrent else None)

    @classmethod
    def build(cls, cfg: TrainConfig, obs_space: gym.Space, action_space: gym.Space, masked: bool = False) -> "Agent":
        """The policy for these spaces: a CNN over image observations (never normalized), else MLPs;
        with ``masked``, wrapped to read action masks (``Discrete`` actions only)."""
        encoder = make_encoder(obs_space)
        if encoder.image is not None and cfg.activation != "tanh":
            raise UnsupportedSpaceError(f"--activation {cfg.activation} sets the MLPs' activation; {cfg.env}'s images "
                                        "go through a CNN, which keeps its ReLU (drop the flag)")
        if cfg.memory and masked:
            raise UnsupportedSpaceError(f"--memory {cfg.memory} does not read action masks yet; {cfg.env} gives them")
        if cfg.memory and encoder.image is not None:
            model = RecurrentCNNActorCritic(encoder.image, encoder.scale, make_head(action_space),  # type: ignore[attr-defined]
                                            cfg.memory, cfg.memory_size)
            norm = ObsNormalizer((encoder.dim,), False, dtype=np.uint8)
        elif cfg.memory:
            model = RecurrentActorCritic(obs_space, action_space, cfg.memory, cfg.memory_size, cfg.hidden_sizes,
                                         cfg.activation)
            norm = ObsNormalizer((encoder.dim,), cfg.norm_obs, scaled=encoder.continuous)
        elif encoder.image is not None:
            model = CNNActorCritic(encoder.image, encoder.scale, make_head(action_space))  # type: ignore[attr-defined]
            norm = ObsNormalizer((encoder.dim,), False, dtype=np.uint8)
        else:
            model = MLPActorCritic(obs_space, action_space, cfg.hidden_sizes, cfg.activation)
            norm = ObsNormalizer((encoder.dim,), cfg.norm_obs, scaled=encoder.continuous)
        if not cfg.ortho_init:
            default_init(model)
        if masked:
            if not isinstance(action_space, gym.spaces.Discrete):
                raise UnsupportedSpaceError(f"{cfg.env} gives action masks for a {action_space}; rlkit masks "
                                            "Discrete actions only")
            model = MaskedActorCritic(model, int(action_space.n))
        return cls(model, norm, encoder)

    @classmethod
    def load(cls, run_dir: str | Path) -> tuple["Agent", TrainConfig]:
        """The agent saved in a run directory (latest checkpoint) and its config."""
        tensors, state, ckpt = load_checkpoint(run_dir, ("config",))
        if state.get("trainer") == "rlhf":
            raise ConfigError(f"{str(run_dir)!r} is an RLHF run; Agent.load and rlkit eval read Gymnasium runs "
                              "(an RLHF run's policy is in its checkpoints and policy.safetensors)")
        require_state(str(ckpt), state, ("obs_norm",))
        if not isinstance(state["config"], dict):
            raise CheckpointError(f"checkpoint at {str(ckpt)!r} holds a config that is not a mapping in state.json")
        require_known_options(TrainConfig, state["config"], str(run_dir), "evaluate or load it")
        cfg = TrainConfig.from_dict(state["config"])
        env = make_env(cfg.env, cfg.env_options, cfg.env_wrappers)
        try:
            agent = cls.build(cfg, env.observation_space, env.action_space, env_gives_masks(env, cfg.env))
        finally:
            close_envs(env, cfg.env)
        with restoring(ckpt):
            restore_weights(agent.model, unprefixed("model", tensors))
            agent.obs_norm.load_state_dict(state["obs_norm"])
        agent.actor = agent.model.snapshot()
        return agent, cfg


def load_agent(run_dir: str | Path) -> Agent:
    return Agent.load(run_dir)[0]

