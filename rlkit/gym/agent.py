"""A trained agent: policy + frozen observation normalization, loadable from a run."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

import gymnasium as gym
import numpy as np

from rlkit.core.encoders import ObsEncoder, encode_items, make_encoder
from rlkit.core.heads import make_head
from rlkit.core.normalization import ObsNormalizer
from rlkit.errors import (CheckpointError, ConfigError, EnvError, ObservationError, RlkitError,
                          UnsupportedSpaceError, one_line)
from rlkit.gym.config import TrainConfig
from rlkit.gym.cnn import CNNActorCritic
from rlkit.gym.envs import ENV_FAILURES, close_envs, env_gives_masks, make_env
from rlkit.gym.masking import MaskedActorCritic, check_mask, env_mask
from rlkit.gym.policies import MLPActorCritic
from rlkit.io.checkpoint import load_checkpoint, require_state, restore_weights, restoring, unprefixed
from rlkit.io.progress import progress_bar
from rlkit.io.signals import env_wait
from rlkit.variants.migrate import require_known_options


DEFAULT_EVAL_CAP = 10_000
"""Steps after which an evaluation episode is cut when the env has no time limit of its own."""


class EvalResult(NamedTuple):
    returns: list[float]
    lengths: list[int]
    capped: int = 0
    """Episodes cut at the step cap (they count with the return they had)."""

    @property
    def mean(self) -> float:
        return float(np.mean(self.returns))

    @property
    def std(self) -> float:
        return float(np.std(self.returns))


@dataclass
class EvalEpisodes:
    """One evaluation in progress on its env: episodes seeded ``seed, seed + 1, ...`` one after
    another, each cut after ``cap`` steps. The protocol :func:`run_episodes` steps for one policy
    and a population steps for all its members in lockstep."""

    env: gym.Env
    env_id: str
    seed: int
    episodes: int
    cap: int
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    capped: int = 0
    obs: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    total: float = 0.0
    steps: int = 0

    def start(self) -> None:
        """Reset for the next episode."""
        with env_wait():
            self.obs, self.info = self.env.reset(seed=self.seed + len(self.returns))
        self.total, self.steps = 0.0, 0

    def step(self, action: Any) -> bool:
        """Step with ``action``; returns whether the last episode has ended."""
        with env_wait():  # after a stop signal, a step stuck for the grace period is given up
            self.obs, reward, terminated, truncated, self.info = self.env.step(action)
        self.total += float(reward)
        self.steps += 1
        done = terminated or truncated
        if not done and self.steps < self.cap:
            return False
        self.capped += not done
        self.returns.append(self.total)
        self.lengths.append(self.steps)
        if len(self.returns) == self.episodes:
            return True
        self.start()
        return False

    def result(self) -> EvalResult:
        return EvalResult(self.returns, self.lengths, self.capped)


def open_episodes(env_id: str, episodes: int, seed: int, max_steps: int | None = None,
                  env_kwargs: dict[str, Any] | None = None, wrappers: str = "") -> EvalEpisodes:
    """The evaluation env made and its first episode started (the env is closed if that fails).
    The cap: ``max_steps``, else the env's own time limit, else :data:`DEFAULT_EVAL_CAP`."""
    env = make_env(env_id, env_kwargs, wrappers)
    cap = max_steps or (env.spec.max_episode_steps if env.spec else None) or DEFAULT_EVAL_CAP
    run = EvalEpisodes(env, env_id, seed, episodes, cap)
    with _closed_on_failure(env, env_id):
        run.start()
    return run


@contextlib.contextmanager
def _closed_on_failure(env: gym.Env, env_id: str) -> Iterator[None]:
    """A failure inside closes ``env`` (at once) and leaves as :func:`eval_failure` reports it."""
    try:
        yield
    except BaseException as exc:
        close_envs(env, env_id, abort=True)
        failure = eval_failure(env_id, exc)
        if failure is exc:
            raise
        raise failure from exc


def eval_failure(env_id: str, exc: BaseException) -> BaseException:
    """An evaluation's failure as every evaluation reports it: the env's or the policy's exception
    (``sys.exit`` included) as one line; rlkit's own errors and interrupts as they are."""
    if isinstance(exc, ENV_FAILURES) and not isinstance(exc, RlkitError):
        return EnvError(f"evaluation on {env_id} failed: {type(exc).__name__}: {one_line(exc)}")
    return exc


def run_episodes(act: Callable[..., np.ndarray], env_id: str, episodes: int, seed: int = 0,
                 max_steps: int | None = None, progress: bool = False,
                 env_kwargs: dict[str, Any] | None = None, masked: bool = False, wrappers: str = "") -> EvalResult:
    """Returns of ``act`` over ``episodes`` episodes (seeds ``seed, seed+1, ...``). Each episode is
    cut after ``max_steps`` (default: the env's own time limit, else :data:`DEFAULT_EVAL_CAP`) so
    an env that never ends cannot hang the evaluation. The protocol every rlkit evaluation (and
    the sweep's baselines) uses. ``progress``: a bar of episodes on a terminal; ``env_kwargs``: for
    ``gymnasium.make``; ``masked``: ``act(obs, action_mask=...)`` gets the env's action mask;
    ``wrappers``: the run's wrapper stack (its evaluation side, :mod:`rlkit.gym.wrappers`)."""
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes <= 0:
        raise ConfigError(f"episodes must be a positive integer, got {episodes!r}")
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps <= 0):
        raise ConfigError(f"max_steps must be a positive integer or None, got {max_steps!r}")
    run = open_episodes(env_id, episodes, seed, max_steps, env_kwargs, wrappers)
    env, done = run.env, False
    bar = progress_bar(episodes, "episode", progress, "evaluating")
    with contextlib.closing(bar), _closed_on_failure(env, env_id):
        while not done:
            action = act(run.obs, action_mask=env_mask(env, run.info, env.action_space.n)) if masked else act(run.obs)
            ended = len(run.returns)
            done = run.step(action)
            if len(run.returns) > ended:
                bar.update(1)
                bar.set_postfix_str(f"return={np.mean(run.returns):.1f}", refresh=False)
    close_envs(env, env_id)
    return run.result()


class Agent:
    """Acts with the trained policy; normalization statistics are frozen."""

    def __init__(self, model: MLPActorCritic | CNNActorCritic | MaskedActorCritic, obs_norm: ObsNormalizer,
                 encoder: ObsEncoder) -> None:
        self.model, self.obs_norm, self.encoder = model, obs_norm, encoder
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
        if deterministic:
            actions = self.actor.mode(x)
        else:
            actions = self.actor.act(x, rng if rng is not None else np.random.default_rng()).actions
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
        return run_episodes(self.act, env_id, episodes, seed, max_steps, progress, env_kwargs, self.masked, wrappers)

    @classmethod
    def build(cls, cfg: TrainConfig, obs_space: gym.Space, action_space: gym.Space, masked: bool = False) -> "Agent":
        """The policy for these spaces: a CNN over image observations (never normalized), else MLPs;
        with ``masked``, wrapped to read action masks (``Discrete`` actions only)."""
        encoder = make_encoder(obs_space)
        if encoder.image is not None:
            model = CNNActorCritic(encoder.image, encoder.scale, make_head(action_space))  # type: ignore[attr-defined]
            norm = ObsNormalizer((encoder.dim,), False, dtype=np.uint8)
        else:
            model = MLPActorCritic(obs_space, action_space, cfg.hidden_sizes)
            norm = ObsNormalizer((encoder.dim,), cfg.norm_obs, scaled=encoder.continuous)
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

