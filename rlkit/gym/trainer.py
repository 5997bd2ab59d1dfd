"""The PPO trainer on Gymnasium environments: env -> rollout buffer -> advantages -> loss.

The trainer composes a policy (:class:`MLPActorCritic` + head), vectorized envs, a
:class:`RolloutBuffer`, an optimizer over :class:`FlatParameters`, a batch source (the latest
rollout, or HP3O's hybrid batches) and a list of update hooks (Outer-PPO). Variants plug in
through :mod:`rlkit.variants.base`; the loop around updates is :mod:`rlkit.core.loop`'s.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from rlkit.core.buffer import Batch, FullBatch, Rollout, RolloutBuffer, iterate_minibatches
from rlkit.core.device import torch_device
from rlkit.core.loop import (EPISODE_RESEED_STRIDE, EVAL_SEED_OFFSET, Interrupted, Iteration, Schedule, open_logger,
                             open_run_dir, run_updates, seed_and_threads, timestamp, write_result)
from rlkit.core.normalization import RewardScaler
from rlkit.core.optim import FlatParameters
from rlkit.core.update import explained_variance, ppo_epochs
from rlkit.errors import NonFiniteError
from rlkit.fast import select_kernels
from rlkit.gym.agent import Agent, EvalResult
from rlkit.gym.checkpoint import finished_result, load_gym, resume_config, save_gym
from rlkit.gym.config import TrainConfig
from rlkit.gym.envs import as_observation_array, close_envs, make_vec_env, reset_envs, step_envs
from rlkit.gym.episodes import Episodes
from rlkit.io.logger import Logger
from rlkit.variants import PlugContext, variant_fields
from rlkit.variants.base import Passes
from rlkit.variants.fresh import FreshRollout
from rlkit.variants.hp3o_episodes import HybridBatches


@dataclass
class TrainResult:
    """What ``rlkit.train`` returns (and ``rlkit train`` prints as one JSON line)."""

    env: str
    seed: int
    total_steps: int
    steps_per_second: float
    eval_return_mean: float
    eval_return_std: float
    run_dir: str
    variant: str
    updates: int
    eval_history: list[tuple[int, float, float]] = field(default_factory=list)
    """``(env steps, return mean, return std)`` of every evaluation (``--eval-every``, and the final one)."""
    eval_seconds: list[float] = field(default_factory=list)
    """Training seconds (rollouts and updates, not evaluation) before each evaluation of ``eval_history``."""
    agent: Agent | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, object]:
        """The result as JSON values (a NaN return, e.g. with no evaluation, becomes null)."""
        out = {k: v for k, v in asdict(self).items() if k != "agent"}
        return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in out.items()}

    def act(self, obs: np.ndarray) -> np.ndarray:
        assert self.agent is not None
        return self.agent.act(obs)


class PPOTrainer:
    """Trains one :class:`TrainConfig`; ``train()`` runs it to the end (or resumes it).

    With ``cfg.resume`` the run continues from its newest valid checkpoint with its own config;
    ``changes`` may set the :data:`rlkit.gym.checkpoint.RESUMABLE` fields (``total_steps`` to extend a run)."""

    def __init__(self, cfg: TrainConfig, changes: dict[str, object] | None = None) -> None:
        self.resumed = bool(cfg.resume)
        checkpoint = None
        if cfg.resume:
            cfg, checkpoint = resume_config(cfg.resume, changes or {})
        self.cfg = cfg
        seed_and_threads(cfg.seed, cfg.torch_threads)
        self.device = torch_device(cfg.device)
        self.envs = make_vec_env(cfg.env, cfg.num_envs, cfg.async_envs)
        self.agent = Agent.build(cfg, self.envs.single_observation_space, self.envs.single_action_space)
        self.model = self.agent.model.to(self.device)
        self.head = self.model.head
        self.flat = FlatParameters(self.model.ordered_parameters(),
                                   split=sum(p.numel() for p in self.model.actor_parameters()))
        self.kernels = select_kernels(cfg.kernels, small_mlp=True, device=self.device)
        self.kernels.prepare(self.model, self.flat)
        self.optimizer = self.kernels.adam(self.flat, cfg.learning_rate, cfg.adam_eps)
        self.obs_norm = self.agent.obs_norm
        self.rew_scaler = RewardScaler(cfg.num_envs, cfg.gamma, cfg.norm_reward)
        self.buffer = RolloutBuffer(cfg.num_steps, cfg.num_envs, self.model.obs_dim, self.head.action_shape,
                                    self.head.action_dtype)
        self.rng = np.random.default_rng(cfg.seed)  # acting (and HP3O's choices)
        self.generator = torch.Generator().manual_seed(cfg.seed)  # minibatch shuffling
        self.episodes = Episodes(cfg.num_envs)
        plugs = cfg.variants.build(PlugContext("gym", self.flat, cfg.ppo, cfg.num_envs, self.rng, self.device,
                                               self.model))
        self.hooks = plugs.hooks
        self.source = plugs.source or FreshRollout(cfg.gamma, cfg.gae_lambda)
        self.updates_done = 0
        self.global_step = 0
        self.seconds = 0.0
        self.eval_history: list[tuple[int, float, float]] = []
        self.eval_seconds: list[float] = []
        default_name = f"{cfg.env.replace('/', '-')}__{cfg.variant}__s{cfg.seed}__{timestamp()}"
        self.run_dir = open_run_dir(cfg.logdir, cfg.run_name, default_name, cfg.resume)
        if checkpoint is not None:
            load_gym(self, *checkpoint)
        self.actor = self.model.snapshot()
        self._start_episodes()

    # ----------------------------------------------------------------------------- rollout
    def _start_episodes(self) -> None:
        """Reset all sub-envs. At update 0 with the run seed, later (after a checkpoint) with a
        seed derived from the update, so a resumed run continues exactly as an uninterrupted one."""
        seed = self.cfg.seed + EPISODE_RESEED_STRIDE * self.updates_done
        raw = reset_envs(self.envs, self.cfg.env, seed)
        self._check_finite(raw, "observations")
        self.obs = self.obs_norm(raw.reshape(self.cfg.num_envs, -1), update=True)
        self.rew_scaler.reset()
        self.source.reset()
        self.episodes.reset()

    def _check_finite(self, x: np.ndarray, what: str) -> None:
        x = as_observation_array(x, self.cfg.env) if what == "observations" else x
        if not np.isfinite(x).all():
            raise NonFiniteError(f"non-finite {what} from {self.cfg.env} during update {self.updates_done + 1}")

    def collect(self) -> np.ndarray:
        """Fill the buffer with ``num_steps`` vector steps; returns V of the last observations."""
        cfg, buf, actor, n = self.cfg, self.buffer, self.actor, self.cfg.num_envs
        obs = self.obs
        for t in range(cfg.num_steps):
            act = actor.act(obs, self.rng, with_values=False)
            buf.add_action(t, obs, act.actions, act.log_probs, act.values)
            raw_obs, rewards, terminated, truncated, info = step_envs(self.envs, cfg.env, self.head.to_env(act.actions))
            self._check_finite(raw_obs, "observations")
            self._check_finite(rewards, "rewards")
            dones = terminated | truncated
            buf.add_outcome(t, self.rew_scaler(rewards, dones, update=True), rewards, terminated, dones)
            timeouts = truncated & ~terminated
            if timeouts.any():  # bootstrap a time-out from V(final observation)
                ids = np.flatnonzero(timeouts)
                final = np.stack([info["final_obs"][i] for i in ids]).reshape(len(ids), -1)
                self._check_finite(final, "observations")
                final = self.obs_norm(final, update=False)
                buf.set_final(t, ids, final, actor.value(final))
            obs = self.obs_norm(raw_obs.reshape(n, -1), update=True)
        self.obs = obs
        self.global_step += cfg.batch_size
        self.episodes.rollout(buf.np["raw_rewards"], buf.np["dones"])
        buf.set_values(actor.value)  # V(s_t) for the whole rollout in one batched pass (same snapshot)
        return actor.value(obs)

    # ------------------------------------------------------------------------------ update
    def update(self) -> dict[str, float]:
        """One iteration: rollout, the batch source's batches, the hooks around the inner epochs."""
        last_values = self.collect()
        source, stats = self.source.batches(Rollout(self.buffer, last_values), self.updates_done)
        if source is None:  # e.g. HP3O before the first finished trajectory: nothing to learn from yet
            return stats
        passes = []
        for part in (source.sources if isinstance(source, Passes) else [source]):
            for hook in self.hooks:
                hook.begin()
            part_stats = self.optimize(part)
            for hook in self.hooks:
                part_stats.update(hook.end())
            passes.append(part_stats)
        stats.update({key: float(np.mean([p[key] for p in passes])) for key in passes[0]})
        self.actor = self.model.snapshot()
        return stats

    def optimize(self, source: FullBatch | HybridBatches) -> dict[str, float]:
        """``update_epochs`` epochs of minibatch PPO on ``source.epoch_batch()``; returns mean loss statistics."""
        device, model = self.device, self.model

        def epoch_minibatches() -> Iterator[Batch]:
            batch = Batch(*(x.to(device) for x in source.epoch_batch()))
            return iterate_minibatches(batch, self.cfg.num_minibatches, self.generator, source.shuffle)

        def forward(mb: Batch) -> tuple[torch.Tensor, torch.Tensor, Batch]:
            return (*model.forward(mb.obs), mb)  # no module hooks: ~5 us less per minibatch

        stats = ppo_epochs(epoch_minibatches, forward, self.head, self.flat, self.optimizer, self.cfg.ppo,
                           self.updates_done + 1, self.kernels.loss)
        stats["losses/explained_variance"] = explained_variance(source.pooled.returns, source.pooled.values)
        return stats

    # -------------------------------------------------------------------------------- loop
    def iterate(self) -> Iteration:
        stats = self.update()
        self.updates_done += 1
        stats.update(self._episode_stats())
        recent = f"ret={np.mean(self.episodes.recent):.1f}" if self.episodes.recent else None
        return Iteration(stats, self.global_step, self.cfg.batch_size, recent)

    def after_update(self, stats: dict[str, float], logger: Logger) -> None:
        cfg = self.cfg
        if cfg.eval_every and cfg.eval_episodes and self.updates_done < cfg.num_updates and \
                self.global_step // cfg.eval_every > (self.global_step - cfg.batch_size) // cfg.eval_every:
            self._evaluate(logger)

    def after_checkpoint(self) -> None:
        self._start_episodes()

    def train(self) -> TrainResult:
        cfg = self.cfg
        logger = open_logger(self.run_dir, self.global_step if self.resumed else None, cfg.to_dict(), cfg.variant,
                             ["eval/return_mean", "charts/episodic_return"],
                             lead=variant_fields())
        schedule = Schedule(cfg.num_updates, cfg.learning_rate, cfg.anneal_lr, cfg.checkpoint_every_updates,
                            cfg.num_updates * cfg.batch_size)
        prior = finished_result(self.run_dir) if self.resumed and self.updates_done >= cfg.num_updates else None
        try:
            run_updates(self, self.optimizer, logger, schedule, cfg.progress, self.global_step)
        except BaseException as exc:  # idle workers (after an interrupt's checkpoint) close normally
            close_envs(self.envs, cfg.env, abort=not isinstance(exc, Interrupted))
            logger.close()
            raise
        close_envs(self.envs, cfg.env)
        sps = self.global_step / self.seconds if self.seconds else 0.0
        self.agent.actor = self.model.snapshot()  # the returned agent acts with the trained weights
        if prior is not None:  # a finished run resumed: its final evaluation stands (logged once)
            mean, std = (float("nan") if prior.get(k) is None else prior[k] for k in ("eval_return_mean",
                                                                                    "eval_return_std"))
            self.eval_history = [tuple(e) for e in prior.get("eval_history", self.eval_history)]
            self.eval_seconds = list(prior.get("eval_seconds", self.eval_seconds))
        elif cfg.eval_episodes:
            evaluation = self._evaluate(logger)
            mean, std = evaluation.mean, evaluation.std
        else:
            mean = std = float("nan")
        logger.close()
        result = TrainResult(cfg.env, cfg.seed, self.global_step, sps, mean, std,
                             str(self.run_dir), cfg.variant, self.updates_done, list(self.eval_history),
                             list(self.eval_seconds), self.agent)
        write_result(self.run_dir, result.to_json())
        return result

    def _evaluate(self, logger: Logger) -> EvalResult:
        """Deterministic evaluation of the current policy on its own env and seeds (the training
        envs and random streams are untouched)."""
        self.agent.actor = self.model.snapshot()
        evaluation = self.agent.evaluate(self.cfg.env, self.cfg.eval_episodes, seed=self.cfg.seed + EVAL_SEED_OFFSET,
                                         max_steps=self.cfg.eval_max_steps or None)
        logger.scalars({"eval/return_mean": evaluation.mean, "eval/return_std": evaluation.std,
                        "eval/capped_episodes": float(evaluation.capped)}, self.global_step)
        self.eval_history.append((self.global_step, evaluation.mean, evaluation.std))
        self.eval_seconds.append(self.seconds)
        return evaluation

    def _episode_stats(self) -> dict[str, float]:
        finished = self.episodes.pop()
        if not finished:
            return {}
        returns, lengths = zip(*finished)
        return {"charts/episodic_return": float(np.mean(returns)), "charts/episodic_length": float(np.mean(lengths))}

    # ------------------------------------------------------------------------- checkpoints
    def save(self) -> Path:
        return save_gym(self)

def train(cfg: TrainConfig) -> TrainResult:
    """Train (or resume, with ``cfg.resume``) and evaluate; see :class:`TrainResult`."""
    return PPOTrainer(cfg).train()


def resume(run_dir: str, **changes: object) -> TrainResult:
    """Continue a run from its newest valid checkpoint, e.g. ``resume(path, total_steps=2_000_000)``
    to extend it; only the :data:`rlkit.gym.checkpoint.RESUMABLE` fields may change."""
    return PPOTrainer(TrainConfig(resume=str(run_dir)), changes).train()
