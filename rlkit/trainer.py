"""The PPO trainer: env -> rollout buffer -> advantages -> loss, one path for all data.

The trainer composes a policy (:class:`MLPActorCritic` + head), vectorized envs, a
:class:`RolloutBuffer` and an optimizer over :class:`FlatParameters`. Variants (issue #3)
swap one of those pieces; they never copy the update.
"""

from __future__ import annotations

import json
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from tqdm import tqdm

from rlkit.agent import Agent, EvalResult, torch_device
from rlkit.buffer import Batch, FullBatch, RolloutBuffer, iterate_minibatches
from rlkit.checkpoint import load_checkpoint, new_run_dir, run_dir_of, save_checkpoint
from rlkit.config import TrainConfig
from rlkit.envs import NonFiniteError, make_vec_env, reset_envs, step_envs
from rlkit.hp3o import HP3O, HybridBatches
from rlkit.logger import Logger
from rlkit.normalization import RewardScaler
from rlkit.optim import FlatParameters, make_adam
from rlkit.outer import OuterStep
from rlkit.update import explained_variance, ppo_epochs


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
    agent: Agent | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if k != "agent"}

    def act(self, obs: np.ndarray) -> np.ndarray:
        assert self.agent is not None
        return self.agent.act(obs)


class Episodes:
    """Undiscounted return and length of the episodes in flight (raw rewards)."""

    def __init__(self, num_envs: int) -> None:
        self.ret = np.zeros(num_envs, np.float64)
        self.len = np.zeros(num_envs, np.int64)
        self.finished: list[tuple[float, int]] = []
        self.recent: deque[float] = deque(maxlen=100)

    def rollout(self, rewards: np.ndarray, dones: np.ndarray) -> None:
        """Account a rollout's raw ``rewards [T, N]`` and ``dones [T, N]`` (once per rollout, not
        per step: one cumulative sum instead of T small updates); episodes finish in time order."""
        sums = np.cumsum(rewards, axis=0, dtype=np.float64)
        base = np.zeros(rewards.shape[1])  # cumulative reward at each env's last episode start
        start = np.zeros(rewards.shape[1], np.int64)  # step index of that start
        for t, i in zip(*np.nonzero(dones)):
            ret = float(self.ret[i] + sums[t, i] - base[i])
            self.finished.append((ret, int(self.len[i] + t + 1 - start[i])))
            self.recent.append(ret)
            self.ret[i], self.len[i], base[i], start[i] = 0.0, 0, sums[t, i], t + 1
        self.ret += sums[-1] - base
        self.len += rewards.shape[0] - start

    def reset(self) -> None:
        self.ret[:] = 0.0
        self.len[:] = 0

    def pop(self) -> list[tuple[float, int]]:
        out, self.finished = self.finished, []
        return out


class PPOTrainer:
    """Trains one :class:`TrainConfig`; ``train()`` runs it to the end (or resumes it)."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.resume_from = cfg.resume
        if cfg.resume:
            tensors, state, _ = load_checkpoint(cfg.resume)
            cfg = TrainConfig.from_dict({**state["config"], "resume": cfg.resume})
        self.cfg = cfg
        torch.set_num_threads(cfg.torch_threads)
        torch.manual_seed(cfg.seed)
        self.device = torch_device(cfg.device)
        self.envs = make_vec_env(cfg.env, cfg.num_envs, cfg.async_envs)
        self.agent = Agent.build(cfg, self.envs.single_observation_space, self.envs.single_action_space)
        self.model = self.agent.model.to(self.device)
        self.head = self.model.head
        self.flat = FlatParameters(self.model.ordered_parameters(),
                                   split=sum(p.numel() for p in self.model.actor_parameters()))
        self.model.use_flat_parameters(self.flat)
        self.optimizer = make_adam(self.flat, cfg.learning_rate)
        self.obs_norm = self.agent.obs_norm
        self.rew_scaler = RewardScaler(cfg.num_envs, cfg.gamma, cfg.norm_reward)
        self.buffer = RolloutBuffer(cfg.num_steps, cfg.num_envs, self.model.obs_dim,
                                    self.envs.single_action_space.shape, self.head.discrete)
        self.rng = np.random.default_rng(cfg.seed)  # acting
        self.generator = torch.Generator().manual_seed(cfg.seed)  # minibatch shuffling
        self.episodes = Episodes(cfg.num_envs)
        # Variants (issue #3) swap one piece: the outer step wraps the inner epochs, HP3O the batch source.
        self.outer = OuterStep.from_options(self.flat, cfg)
        self.hp3o = HP3O(cfg.num_envs, cfg.hp3o_buffer_size, cfg.hp3o_trajectories, cfg.hp3o_samples, cfg.gamma,
                         cfg.gae_lambda, cfg.clip_coef, cfg.hp3o_recompute_values,
                         cfg.hp3o_threshold if cfg.hp3o_plus else None) if cfg.hp3o else None
        self.update_idx = 0
        self.global_step = 0
        self.train_seconds = 0.0
        self.eval_history: list[tuple[int, float, float]] = []
        if cfg.resume:
            self.run_dir = run_dir_of(cfg.resume)
            self._load_state(tensors, state)
        else:
            name = cfg.run_name or f"{cfg.env}__{cfg.variant}__s{cfg.seed}__{time.strftime('%Y%m%d-%H%M%S')}"
            self.run_dir = new_run_dir(cfg.logdir, name)
        self.actor = self.model.snapshot()
        self._start_episodes()

    # ----------------------------------------------------------------------------- rollout
    def _start_episodes(self) -> None:
        """Reset all sub-envs. At update 0 with the run seed, later (after a checkpoint) with a
        seed derived from the update, so a resumed run continues exactly as an uninterrupted one."""
        seed = self.cfg.seed + 7919 * self.update_idx
        raw = reset_envs(self.envs, self.cfg.env, seed)
        self._check_finite(raw, "observations")
        self.obs = self.obs_norm(raw.reshape(self.cfg.num_envs, -1), update=True)
        self.rew_scaler.reset()
        if self.hp3o:
            self.hp3o.assembler.discard_pending()
        self.episodes.reset()

    def _check_finite(self, x: np.ndarray, what: str) -> None:
        if not np.isfinite(x).all():
            raise NonFiniteError(f"non-finite {what} from {self.cfg.env} during update {self.update_idx + 1}")

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
        """One iteration: rollout, batch source (the rollout, or HP3O's hybrid batches),
        inner PPO epochs (wrapped by the Outer-PPO step when enabled)."""
        cfg = self.cfg
        last_values = self.collect()
        stats: dict[str, float] = {}
        source: FullBatch | HybridBatches | None
        if self.hp3o:
            self.hp3o.observe(self.buffer, self.update_idx)
            source, hp3o_stats = self.hp3o.batches(self.update_idx, self.rng, self.model, self.device)
            stats.update(hp3o_stats)
        else:
            source = FullBatch(self.buffer.compute_batch(last_values, cfg.gamma, cfg.gae_lambda))
        if source is None:  # HP3O before the first finished trajectory: nothing to learn from yet
            return stats
        if self.outer:
            self.outer.begin()
        stats.update(self.optimize(source))
        if self.outer:
            stats.update(self.outer.end())
        self.actor = self.model.snapshot()
        return stats

    def optimize(self, source: FullBatch | HybridBatches) -> dict[str, float]:
        """``update_epochs`` epochs of minibatch PPO on ``source.epoch_batch()``; returns mean loss statistics."""
        device, model = self.device, self.model

        def epoch_minibatches() -> Iterator[Batch]:
            batch = Batch(*(x.to(device) for x in source.epoch_batch()))
            return iterate_minibatches(batch, self.cfg.num_minibatches, self.generator)

        def forward(mb: Batch) -> tuple[torch.Tensor, torch.Tensor, Batch]:
            return (*model.forward(mb.obs), mb)  # no module hooks: ~5 us less per minibatch

        stats = ppo_epochs(epoch_minibatches, forward, self.head, self.flat, self.optimizer, self.cfg,
                           self.update_idx + 1)
        stats["losses/explained_variance"] = explained_variance(source.pooled.returns, source.pooled.values)
        return stats

    def learning_rate(self) -> float:
        if not self.cfg.anneal_lr:
            return self.cfg.learning_rate
        return self.cfg.learning_rate * (1.0 - self.update_idx / self.cfg.num_updates)

    # -------------------------------------------------------------------------------- loop
    def train(self) -> TrainResult:
        cfg = self.cfg
        logger = Logger(str(self.run_dir), purge_step=self.global_step + 1 if self.resume_from else None)
        if not self.resume_from:
            logger.hparams({"variant": cfg.variant, **cfg.to_dict()}, ["charts/episodic_return"])
            (self.run_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
        bar = tqdm(total=cfg.num_updates * cfg.batch_size, initial=self.global_step, unit="step",
                   disable=not (cfg.progress and sys.stderr.isatty()), dynamic_ncols=True)
        try:
            while self.update_idx < cfg.num_updates:
                start = time.perf_counter()
                lr = self.learning_rate()
                self.optimizer.param_groups[0]["lr"] = lr
                stats = self.update()
                self.update_idx += 1
                seconds = time.perf_counter() - start
                self.train_seconds += seconds
                stats.update(self._episode_stats())
                stats["charts/learning_rate"] = lr
                stats["charts/steps_per_second"] = cfg.batch_size / seconds
                logger.scalars(stats, self.global_step)
                if cfg.eval_every and cfg.eval_episodes and self.update_idx < cfg.num_updates and \
                        self.global_step // cfg.eval_every > (self.global_step - cfg.batch_size) // cfg.eval_every:
                    self._evaluate(logger)
                bar.update(cfg.batch_size)
                if self.episodes.recent:
                    bar.set_postfix(ret=f"{np.mean(self.episodes.recent):.1f}", refresh=False)
                if self.update_idx % cfg.checkpoint_every_updates == 0 or self.update_idx == cfg.num_updates:
                    logger.flush()  # everything up to the checkpoint is on disk before it exists
                    self.save()
                    if self.update_idx < cfg.num_updates:
                        self._start_episodes()
        finally:
            bar.close()
            self.envs.close()
        sps = self.global_step / self.train_seconds if self.train_seconds else 0.0
        self.agent.actor = self.model.snapshot()  # the returned agent acts with the trained weights
        evaluation = self._evaluate(logger) if cfg.eval_episodes else EvalResult([float("nan")], [0])
        logger.close()
        result = TrainResult(cfg.env, cfg.seed, self.global_step, sps, evaluation.mean, evaluation.std,
                             str(self.run_dir), cfg.variant, self.update_idx, list(self.eval_history), self.agent)
        (self.run_dir / "result.json").write_text(json.dumps(result.to_json(), indent=1))
        return result

    def _evaluate(self, logger: Logger) -> EvalResult:
        """Deterministic evaluation of the current policy on its own env and seeds (the training
        envs and random streams are untouched)."""
        self.agent.actor = self.model.snapshot()
        evaluation = self.agent.evaluate(self.cfg.env, self.cfg.eval_episodes, seed=self.cfg.seed + 10_000)
        logger.scalars({"eval/return_mean": evaluation.mean, "eval/return_std": evaluation.std}, self.global_step)
        self.eval_history.append((self.global_step, evaluation.mean, evaluation.std))
        return evaluation

    def _episode_stats(self) -> dict[str, float]:
        finished = self.episodes.pop()
        if not finished:
            return {}
        returns, lengths = zip(*finished)
        return {"charts/episodic_return": float(np.mean(returns)), "charts/episodic_length": float(np.mean(lengths))}

    # ------------------------------------------------------------------------- checkpoints
    def save(self) -> Path:
        opt_state = self.optimizer.state.get(self.flat.param, {})
        tensors = {f"model.{k}": v for k, v in self.model.state_dict().items()}
        tensors.update({f"optim.{k}": v for k, v in opt_state.items() if torch.is_tensor(v)})
        tensors["rng.torch_generator"] = self.generator.get_state()
        hp3o_meta: list[dict[str, object]] = []
        if self.outer:
            tensors.update(self.outer.state_tensors())
        if self.hp3o:
            hp3o_tensors, hp3o_meta = self.hp3o.buffer.state()
            tensors.update(hp3o_tensors)
        state = {"config": self.cfg.to_dict(), "update": self.update_idx, "global_step": self.global_step,
                 "train_seconds": self.train_seconds, "obs_norm": self.obs_norm.state_dict(),
                 "rew_scaler": self.rew_scaler.state_dict(), "rng_numpy": self.rng.bit_generator.state,
                 "recent_returns": list(self.episodes.recent), "hp3o_buffer": hp3o_meta,
                 "eval_history": self.eval_history}
        return save_checkpoint(self.run_dir, f"update-{self.update_idx:07d}", tensors, state)

    def _load_state(self, tensors: dict[str, torch.Tensor], state: dict) -> None:
        with torch.no_grad():
            for k, v in self.model.state_dict().items():
                v.copy_(tensors[f"model.{k}"])  # in place: the flat views stay intact
        self.optimizer.restore_state({k[len("optim."):]: v for k, v in tensors.items() if k.startswith("optim.")})
        self.generator.set_state(tensors["rng.torch_generator"])
        if self.outer:
            self.outer.load_state_tensors(tensors)
        if self.hp3o:
            self.hp3o.buffer.load_state(tensors, state["hp3o_buffer"])
        self.rng.bit_generator.state = state["rng_numpy"]
        self.obs_norm.load_state_dict(state["obs_norm"])
        self.rew_scaler.load_state_dict(state["rew_scaler"])
        self.update_idx, self.global_step = int(state["update"]), int(state["global_step"])
        self.train_seconds = float(state["train_seconds"])
        self.episodes.recent.extend(state["recent_returns"])
        self.eval_history = [tuple(e) for e in state.get("eval_history", [])]


def train(cfg: TrainConfig) -> TrainResult:
    """Train (or resume, with ``cfg.resume``) and evaluate; see :class:`TrainResult`."""
    return PPOTrainer(cfg).train()
