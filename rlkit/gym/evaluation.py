"""Evaluation episodes, the protocol every rlkit evaluation uses (a trained agent's, a
population's members', a sweep's baselines' and a random policy's for a report): episodes seeded
``seed, seed + 1, ...``, each cut at a step cap, on the env as the run made it."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, NamedTuple

import gymnasium as gym
import numpy as np

from rlkit.errors import ConfigError, EnvError, RlkitError, one_line
from rlkit.gym.action_masks import env_mask
from rlkit.gym.envs import ENV_FAILURES, close_envs, make_env
from rlkit.io.progress import progress_bar
from rlkit.io.signals import env_wait

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
                 env_kwargs: dict[str, Any] | None = None, masked: bool = False, wrappers: str = "",
                 start_episode: Callable[[], None] | None = None) -> EvalResult:
    """Returns of ``act`` over ``episodes`` episodes (seeds ``seed, seed+1, ...``). Each episode is
    cut after ``max_steps`` (default: the env's own time limit, else :data:`DEFAULT_EVAL_CAP`) so
    an env that never ends cannot hang the evaluation. The protocol every rlkit evaluation (and
    the sweep's baselines) uses. ``progress``: a bar of episodes on a terminal; ``env_kwargs``: for
    ``gymnasium.make``; ``masked``: ``act(obs, action_mask=...)`` gets the env's action mask;
    ``wrappers``: the run's wrapper stack (its evaluation side, :mod:`rlkit.gym.wrappers`);
    ``start_episode``: called before each episode's first action (a recurrent policy zeroes its state)."""
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes <= 0:
        raise ConfigError(f"episodes must be a positive integer, got {episodes!r}")
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps <= 0):
        raise ConfigError(f"max_steps must be a positive integer or None, got {max_steps!r}")
    run = open_episodes(env_id, episodes, seed, max_steps, env_kwargs, wrappers)
    env, done = run.env, False
    bar = progress_bar(episodes, "episode", progress, "evaluating")
    with contextlib.closing(bar), _closed_on_failure(env, env_id):
        while not done:
            if start_episode is not None and run.steps == 0:
                start_episode()
            action = act(run.obs, action_mask=env_mask(env, run.info, env.action_space.n)) if masked else act(run.obs)
            ended = len(run.returns)
            done = run.step(action)
            if len(run.returns) > ended:
                bar.update(1)
                bar.set_postfix_str(f"return={np.mean(run.returns):.1f}", refresh=False)
    close_envs(env, env_id)
    return run.result()
