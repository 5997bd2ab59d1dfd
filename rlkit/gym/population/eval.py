"""A population's evaluations as one: every member's deterministic episodes in lockstep.

Each member runs its single run's protocol (:class:`rlkit.gym.agent.EvalEpisodes`, as
:func:`rlkit.gym.agent.run_episodes` steps it): its own Gymnasium env, episodes seeded
``eval_seed, eval_seed + 1, ...`` one after another, its frozen normalization statistics, the same
step cap. Only the actor's forward is shared: one batched matmul per layer (:class:`StackedActor`)
for the current observation of every member, each row the bits its own forward gives. A member
whose env or policy fails is reported with its single run's one-line error; the others go on.
"""

from __future__ import annotations

import numpy as np

from rlkit.errors import RlkitError
from rlkit.gym.evaluation import EvalEpisodes, EvalResult, eval_failure, open_episodes
from rlkit.gym.envs import ENV_FAILURES, close_envs
from rlkit.gym.population.host import stuck_error
from rlkit.gym.population.network import StackedActor
from rlkit.gym.trainer import PPOTrainer
from rlkit.io.signals import EnvStuck


def _failed(outcomes: dict[int, EvalResult | RlkitError], k: int, env_id: str, exc: BaseException) -> None:
    """Member ``k`` failed with ``exc`` (one of :data:`ENV_FAILURES`, so its report is always an RlkitError)."""
    outcomes[k] = eval_failure(env_id, exc)  # type: ignore[assignment]


def evaluate_together(members: list[PPOTrainer]) -> list[EvalResult | RlkitError]:
    """Each member's evaluation of its current snapshot (``member.agent.actor``), run in lockstep;
    per member, its :class:`EvalResult` or the one-line error it failed with. Interrupts propagate
    (every env is closed)."""
    agents = [m.agent for m in members]
    outcomes: dict[int, EvalResult | RlkitError] = {}
    running: dict[int, EvalEpisodes] = {}
    stacked = StackedActor([a.actor for a in agents])
    x: np.ndarray | None = None
    try:
        for k, m in enumerate(members):
            cfg = m.cfg
            try:
                running[k] = open_episodes(cfg.env, cfg.eval_episodes, m.eval_seed(), cfg.eval_max_steps or None,
                                           cfg.env_options, cfg.env_wrappers)
            except ENV_FAILURES as exc:
                _failed(outcomes, k, cfg.env, exc)
        while running:
            for k, ev in list(running.items()):
                try:
                    inputs = agents[k].inputs(ev.obs)[0]
                    x = np.zeros((len(members), 1, inputs.shape[1]), np.float32) if x is None else x
                    x[k] = inputs
                except ENV_FAILURES as exc:
                    _failed(outcomes, k, ev.env_id, exc)
                    close_envs(running.pop(k).env, ev.env_id, abort=True)
            if not running:
                break
            params = stacked.params(x)
            for k, ev in list(running.items()):
                try:
                    finished = ev.step(agents[k].model.head.to_env(agents[k].actor.sampler.mode(params[k]))[0])
                except (*ENV_FAILURES, EnvStuck) as exc:  # EnvStuck: given up after a stop signal, the others go on
                    stuck = isinstance(exc, EnvStuck)
                    outcomes[k] = stuck_error(ev.env_id, exc) if stuck else eval_failure(ev.env_id, exc)  # type: ignore
                    close_envs(running.pop(k).env, ev.env_id, abort=True)
                    continue
                if finished:
                    outcomes[k] = ev.result()
                    close_envs(running.pop(k).env, ev.env_id)
    finally:
        for ev in running.values():
            close_envs(ev.env, ev.env_id, abort=True)
    return [outcomes[k] for k in range(len(members))]
