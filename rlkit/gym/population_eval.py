"""A population's evaluations as one: every member's deterministic episodes in lockstep.

Each member runs its single run's protocol (:func:`rlkit.gym.agent.run_episodes`): its own
Gymnasium env, episodes seeded ``eval_seed, eval_seed + 1, ...`` one after another, its frozen
normalization statistics, the same step cap. Only the actor's forward is shared: one batched matmul
per layer (:class:`StackedActor`) for the current observation of every member, each row the bits its
own forward gives. A member whose env or policy fails is reported with its single run's one-line
error; the others go on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlkit.errors import EnvError, RlkitError, one_line
from rlkit.gym.agent import DEFAULT_EVAL_CAP, Agent, EvalResult
from rlkit.gym.envs import close_envs, make_env
from rlkit.gym.stacked import StackedActor
from rlkit.gym.trainer import PPOTrainer


@dataclass
class _Episodes:
    """One member's evaluation in progress."""

    env: Any
    env_id: str
    seed: int
    episodes: int
    cap: int
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    capped: int = 0
    obs: Any = None
    total: float = 0.0
    steps: int = 0

    def start(self) -> None:
        self.obs, _ = self.env.reset(seed=self.seed + len(self.returns))
        self.total, self.steps = 0.0, 0

    def step(self, action: Any) -> bool:
        """Step with ``action``; returns whether the member's last episode has ended."""
        self.obs, reward, terminated, truncated, _ = self.env.step(action)
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


def _failure(env_id: str, exc: BaseException) -> RlkitError:
    """An evaluation failure as the single run reports it."""
    if isinstance(exc, RlkitError):
        return exc
    return EnvError(f"evaluation on {env_id} failed: {type(exc).__name__}: {one_line(exc)}")


def _open(member: PPOTrainer) -> _Episodes:
    cfg = member.cfg
    env = make_env(cfg.env, cfg.env_options, cfg.env_wrappers)
    cap = cfg.eval_max_steps or (env.spec.max_episode_steps if env.spec else None) or DEFAULT_EVAL_CAP
    episodes = _Episodes(env, cfg.env, member.eval_seed(), cfg.eval_episodes, cap)
    try:
        episodes.start()
    except BaseException:
        close_envs(env, cfg.env, abort=True)
        raise
    return episodes


def evaluate_together(members: list[PPOTrainer]) -> list[EvalResult | RlkitError]:
    """Each member's evaluation of its current snapshot (``member.agent.actor``), run in lockstep;
    per member, its :class:`EvalResult` or the one-line error it failed with. Interrupts propagate
    (every env is closed)."""
    agents: list[Agent] = [m.agent for m in members]
    outcomes: dict[int, EvalResult | RlkitError] = {}
    running: dict[int, _Episodes] = {}
    stacked = StackedActor([a.actor for a in agents])
    x: np.ndarray | None = None
    try:
        for k, m in enumerate(members):
            try:
                running[k] = _open(m)
            except Exception as exc:
                outcomes[k] = _failure(m.cfg.env, exc)
        while running:
            for k, ev in list(running.items()):
                try:
                    inputs = agents[k].inputs(ev.obs)[0]
                    x = np.zeros((len(members), 1, inputs.shape[1]), np.float32) if x is None else x
                    x[k] = inputs
                except Exception as exc:
                    outcomes[k] = _failure(ev.env_id, exc)
                    close_envs(running.pop(k).env, ev.env_id, abort=True)
            if not running:
                break
            params = stacked.params(x)
            for k, ev in list(running.items()):
                try:
                    actor = agents[k].actor
                    finished = ev.step(agents[k].model.head.to_env(actor.sampler.mode(params[k]))[0])
                except Exception as exc:
                    outcomes[k] = _failure(ev.env_id, exc)
                    close_envs(running.pop(k).env, ev.env_id, abort=True)
                    continue
                if finished:
                    outcomes[k] = EvalResult(ev.returns, ev.lengths, ev.capped)
                    close_envs(running.pop(k).env, ev.env_id)
    finally:
        for ev in running.values():
            close_envs(ev.env, ev.env_id, abort=True)
    return [outcomes[k] for k in range(len(members))]
