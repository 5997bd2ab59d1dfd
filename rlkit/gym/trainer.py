"""The PPO trainer on Gymnasium environments: env -> rollout buffer -> advantages -> loss.

The trainer composes a policy (:class:`MLPActorCritic` + head), vectorized envs, a
:class:`RolloutBuffer`, an optimizer over :class:`FlatParameters`, a batch source (the latest
rollout, or HP3O's hybrid batches) and a list of update hooks (Outer-PPO). Variants plug in
through :mod:`rlkit.variants.base`; the loop around updates is :mod:`rlkit.core.loop`'s.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from rlkit.core.buffer import Batch, FullBatch, Rollout, RolloutBuffer, iterate_minibatches
from rlkit.core.device import torch_device
from rlkit.core.encoders import encode_items
from rlkit.core.learner import Progress
from rlkit.core.loop import EPISODE_RESEED_STRIDE, EVAL_SEED_OFFSET, Iteration, RunSpec, Schedule, train_steps
from rlkit.core.normalization import RewardScaler
from rlkit.core.objective import with_behaviour_params
from rlkit.core.optim import FlatParameters
from rlkit.core.sequences import SequenceBatches, SequenceMinibatch, sequences_on
from rlkit.core.update import explained_variance, ppo_epochs
from rlkit.errors import ConfigError, EnvError, NonFiniteError, one_line
from rlkit.fast import select_kernels
from rlkit.gym.agent import Agent, EvalResult
from rlkit.gym.checkpoint import (Evaluations, GymParts, finished_result, load_gym, resume_config, save_gym,
                                  trained_in_population)
from rlkit.gym.config import TrainConfig
from rlkit.gym.envs import (as_observation_array, close_envs, make_vec_env, new_run_warnings, reset_envs, step_envs,
                            vector_env_masks)
from rlkit.gym.episodes import Episodes
from rlkit.gym.policies import ActResult, NumpyActor
from rlkit.gym.result import TrainResult
from rlkit.gym.recurrent_rollout import recurrent_rollout
from rlkit.io.checkpoint import discard_unused
from rlkit.io.logger import Logger
from rlkit.io.run import open_run_dir, timestamp, write_result
from rlkit.io.signals import Interrupted
from rlkit.io.threads import blas_threads, seed_and_threads
from rlkit.variants.plugged import build_learner
from rlkit.variants.fresh import FreshRollout
from rlkit.variants.hp3o_episodes import HybridBatches


class PPOTrainer:
    """Trains one :class:`TrainConfig`; ``train()`` runs it to the end (or resumes it).

    With ``cfg.resume`` the run continues from its newest valid checkpoint with its own config;
    ``changes`` may set the :data:`rlkit.gym.checkpoint.RESUMABLE` fields (``total_steps`` to extend a run)."""

    def __init__(self, cfg: TrainConfig, changes: dict[str, object] | None = None,
                 in_process_envs: bool = False) -> None:
        """``in_process_envs``: the envs made in this process whatever ``async_envs`` says (a
        population of two or more steps its members' envs in one worker of its own)."""
        self.resumed = bool(cfg.resume)
        self.population_member = False
        """Set by the population that trains this run (its checkpoints then say so)."""
        # A resumed run is locked before anything of it is read: a second process is refused first.
        early = open_run_dir(cfg.logdir, None, "", cfg.resume) if cfg.resume else None
        with early.lock.released_on_error() if early else contextlib.nullcontext():
            stored = None
            if cfg.resume:
                cfg, stored = resume_config(cfg.resume, changes or {})
            self.cfg = cfg
            seed_and_threads(cfg.seed, cfg.torch_threads)
            self.device = torch_device(cfg.device)
            new_run_warnings()
            self.envs = make_vec_env(cfg.env, cfg.num_envs, cfg.async_envs and not in_process_envs, cfg.env_wrappers,
                                     cfg.env_backend,
                                     **cfg.env_options)
            try:
                self._build()
                env_name = re.sub(r"[^A-Za-z0-9._+=,-]", "-", cfg.env)  # module:Id and ns/Id as one plain name
                default_name = f"{env_name}__{cfg.variant}__s{cfg.seed}__{timestamp()}"
                self.run_dir, self.lock = early or open_run_dir(cfg.logdir, cfg.run_name, default_name, None)
                with self.lock.released_on_error(), self._discarded_on_error():
                    self.progress = load_gym(self.run_dir, stored, self.learner, self.parts) if stored else Progress()
                    self.actor = self.model.snapshot()
                    self.prior: dict | None = None
                    """The result of a finished run that is resumed (its final evaluation stands)."""
                    self._start_episodes()
            except BaseException:  # workers must not outlive a start-up that failed
                close_envs(self.envs, cfg.env, abort=True)
                raise

    @contextlib.contextmanager
    def _discarded_on_error(self) -> Iterator[None]:
        """A new run whose start-up fails leaves no folder behind (nothing of it was written yet)."""
        try:
            yield
        except BaseException:
            if not self.resumed:
                self.lock.release()
                discard_unused(self.run_dir)
            raise

    def discard(self) -> None:
        """Give up a new run before it trained: close its envs, release and remove its folder if
        nothing was written there (a population whose start-up failed)."""
        close_envs(self.envs, self.cfg.env, abort=True)
        self.lock.release()
        if not self.resumed:
            discard_unused(self.run_dir)

    def _build(self) -> None:
        """The model, kernels, learner and buffer for ``self.cfg`` on ``self.envs``' spaces."""
        cfg = self.cfg
        masked = vector_env_masks(self.envs, cfg.env, cfg.env_options)
        self.agent = Agent.build(cfg, self.envs.single_observation_space, self.envs.single_action_space, masked)
        self.model = self.agent.model.to(self.device)
        self.head = self.model.head
        flat = FlatParameters(self.model.ordered_parameters(),
                              split=sum(p.numel() for p in self.model.actor_parameters()))
        image = self.agent.encoder.image is not None
        # (the fused MLP computes tanh layers)
        small_mlp = not (image or masked or cfg.memory) and cfg.activation == "tanh"
        self.kernels = select_kernels(cfg.kernels, small_mlp=small_mlp, device=self.device)
        self.kernels.prepare(self.model, flat)
        self.learner = build_learner("gym", cfg, flat, self.kernels.adam(flat, cfg.learning_rate, cfg.adam_eps),
                                     self.device, self.model, FreshRollout(cfg.gamma, cfg.gae_lambda),
                                     generator_device=torch.device("cpu")).learner
        self.kernels.announce(self.learner.objective)
        self.parts = GymParts(self.model, self.agent.obs_norm, RewardScaler(cfg.num_envs, cfg.gamma, cfg.norm_reward),
                              Episodes(cfg.num_envs), Evaluations())
        self.buffer = RolloutBuffer(cfg.num_steps, cfg.num_envs, self.model.obs_dim, self.head.action_shape,
                                    self.head.action_dtype, torch.uint8 if image else torch.float32)
        self.memory = recurrent_rollout(cfg, self.model, self.learner.objective)

    # ----------------------------------------------------------------------------- rollout
    def _start_episodes(self) -> None:
        """Reset all sub-envs. At update 0 with the run seed, later (after a checkpoint) with a
        seed derived from the update, so a resumed run continues exactly as an uninterrupted one."""
        self.obs = self._with_masks(self.parts.obs_norm(self.encode(reset_envs(self.envs, self.cfg.env,
                                                                                self.episode_seed())), update=True))
        self.parts.rew_scaler.reset()
        if self.memory:
            self.memory.reset()
        self.learner.source.reset()
        self.parts.episodes.reset()

    def episode_seed(self) -> int:
        """The seed the envs are reset with: the run seed at update 0, derived from the update after."""
        return self.cfg.seed + EPISODE_RESEED_STRIDE * self.progress.updates_done

    def encode(self, raw: object, items: bool = False) -> np.ndarray:
        """``[N, dim]`` encoded observations of a vector-env batch (or a list of single ones), checked
        finite; an observation that does not fit the space is a one-line :class:`EnvError`."""
        encoder = self.agent.encoder
        try:
            obs = encode_items(encoder, raw) if items else encoder.batch(raw, self.cfg.num_envs)  # type: ignore[arg-type]
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            raise EnvError(f"{self.cfg.env} returned an observation that does not fit its space {encoder.space}: "
                           f"{one_line(exc)}") from None
        self.check_finite(obs, "observations")
        return obs

    def _with_masks(self, obs: np.ndarray, final: bool = False) -> np.ndarray:
        """``obs`` with the envs' action masks appended as 0/1 columns (see :mod:`rlkit.gym.masking`);
        a final observation (only its value is read) gets an all-allowed mask."""
        if not self.agent.masked:
            return obs
        n = self.envs.single_action_space.n  # type: ignore[attr-defined]
        if final:
            return np.concatenate([obs, np.ones((len(obs), n), obs.dtype)], axis=1)
        try:
            masks = self.envs.action_masks(n)  # type: ignore[attr-defined]
        except ValueError as exc:
            raise EnvError(f"{self.cfg.env}: {one_line(exc)}") from None
        return np.concatenate([obs, masks.astype(obs.dtype)], axis=1)

    def check_finite(self, x: np.ndarray, what: str) -> None:
        x = as_observation_array(x, self.cfg.env) if what == "observations" else x
        if not np.isfinite(x).all():
            raise NonFiniteError(f"non-finite {what} from {self.cfg.env} during update "
                                 f"{self.progress.updates_done + 1}")

    def collect(self) -> np.ndarray:
        """Fill the buffer with ``num_steps`` vector steps; returns V of the last observations."""
        actor, rng = self.actor, self.learner.rng
        for t in range(self.cfg.num_steps):
            act = self.memory.act(t, actor, self.obs, rng) if self.memory else actor.act(self.obs, rng, with_values=False)
            self.record_step(t, act, actor)
        return self.end_rollout(actor)

    def record_step(self, t: int, act: ActResult, actor: NumpyActor) -> None:
        """Step ``t`` of the rollout with the actions ``act`` sampled on ``self.obs``: store them, step
        the envs, store the outcome (a time-out bootstrapped from ``actor``'s V(final observation))
        and move ``self.obs`` on. A population samples ``act`` for all its members at once."""
        cfg, buf, obs_norm = self.cfg, self.buffer, self.parts.obs_norm
        buf.add_action(t, self.obs, act.actions, act.log_probs, act.values)
        raw_obs, rewards, terminated, truncated, info = step_envs(self.envs, cfg.env, self.head.to_env(act.actions))
        next_obs = self.encode(raw_obs)
        self.check_finite(rewards, "rewards")
        dones = terminated | truncated
        buf.add_outcome(t, self.parts.rew_scaler(rewards, dones, update=True), rewards, terminated, dones)
        timeouts = truncated & ~terminated
        if timeouts.any():  # bootstrap a time-out from V(final observation)
            ids = np.flatnonzero(timeouts)
            final = self._with_masks(obs_norm(self.encode([info["final_obs"][i] for i in ids], items=True),
                                              update=False), final=True)
            buf.set_final(t, ids, final, self.memory.final_values(actor, final, ids) if self.memory else actor.value(final))
        if self.memory:
            self.memory.stepped(dones)
        self.obs = self._with_masks(obs_norm(next_obs, update=True))

    def end_rollout(self, actor: NumpyActor) -> np.ndarray:
        """After the rollout's last step: episode statistics, V(s_t) for the whole rollout in one
        batched pass with ``actor`` (the snapshot that acted); returns V of the last observations."""
        self.parts.episodes.rollout(self.buffer.np["raw_rewards"], self.buffer.np["dones"])
        if self.memory:  # its values came with its actions, each in the state it was met in
            return self.memory.last_values(actor, self.obs)
        self.buffer.set_values(actor.value)
        return actor.value(self.obs)

    # ------------------------------------------------------------------------------ update
    def update(self) -> dict[str, float]:
        """One iteration: rollout, the batch source's batches, the learner's passes over them."""
        last_values = self.collect()
        source, stats = self.learner.source.batches(Rollout(self.buffer, last_values), self.progress.updates_done)
        if source is None:  # e.g. HP3O before the first finished trajectory: nothing to learn from yet
            return stats
        source = with_behaviour_params(source, self.learner, lambda obs: self.model.forward(obs.to(self.device))[0],
                                       self.head, self.cfg.num_minibatches)
        if self.memory:
            source = self.memory.sequences(source, self.model, self.cfg.num_minibatches, self.learner.generator)
        stats.update(self.learner.passes(source, self.optimize))
        self.actor = self.model.snapshot()
        return stats

    def optimize(self, source: FullBatch | HybridBatches | SequenceBatches) -> dict[str, float]:
        """``update_epochs`` epochs of minibatch PPO on ``source``'s minibatches (transitions, or a
        recurrent policy's whole sequences); returns mean loss statistics."""
        device, model, learner = self.device, self.model, self.learner

        def epoch_minibatches() -> Iterator[Batch | SequenceMinibatch]:
            if isinstance(source, SequenceBatches):
                return (sequences_on(mb, device) for mb in source.minibatches(self.cfg.num_minibatches,
                                                                               learner.generator))
            batch = source.epoch_batch().map(lambda x: x.to(device))
            return iterate_minibatches(batch, self.cfg.num_minibatches, learner.generator, source.shuffle)

        def forward(mb: Batch | SequenceMinibatch) -> tuple[torch.Tensor, torch.Tensor, Batch]:
            if isinstance(mb, SequenceMinibatch):
                return (*model.replay(mb.obs, mb.starts, mb.state), mb.targets)  # type: ignore[union-attr]
            return (*model.forward(mb.obs), mb)  # forward, not __call__: no module hooks on every minibatch

        stats = ppo_epochs(epoch_minibatches, forward, self.head, learner.flat, learner.optimizer, self.cfg.ppo,
                           self.progress.updates_done + 1, self.kernels.loss, learner.objective)
        stats["losses/explained_variance"] = explained_variance(source.pooled.returns, source.pooled.values)
        return stats

    # -------------------------------------------------------------------- what the loop calls
    def iterate(self) -> Iteration:
        stats = self.update()
        stats.update(self.episode_stats())
        recent = self.parts.episodes.recent
        return Iteration(stats, self.cfg.batch_size, f"ret={np.mean(recent):.1f}" if recent else None)

    def after_update(self, stats: dict[str, float], logger: Logger) -> None:
        if self.evaluation_due():
            self._evaluate(logger)

    def evaluation_due(self) -> bool:
        """After an update: whether it crossed a multiple of ``eval_every`` (the last update's
        evaluation is the final one, in :meth:`finish`)."""
        cfg, steps = self.cfg, self.progress.env_steps
        return bool(cfg.eval_every and cfg.eval_episodes and self.progress.updates_done < cfg.num_updates and
                    steps // cfg.eval_every > (steps - cfg.batch_size) // cfg.eval_every)

    def save(self, scheduled: bool) -> Path:
        return save_gym(self.run_dir, self.cfg, self.learner, self.progress, self.parts, scheduled,
                        self.population_member)

    def after_checkpoint(self) -> None:
        self._start_episodes()

    def finish(self, logger: Logger) -> None:
        """Close the envs; evaluate, unless a finished run was resumed (its final evaluation stands)."""
        if self.end_training():
            self._evaluate(logger)

    def end_training(self) -> bool:
        """Close the envs and snapshot the trained actor; returns whether a final evaluation is due."""
        close_envs(self.envs, self.cfg.env)
        self.agent.actor = self.model.snapshot()  # the returned agent acts with the trained weights
        return self.prior is None and bool(self.cfg.eval_episodes)

    def abort(self, error: BaseException) -> None:
        """Close the envs (idle workers, after an interrupt's checkpoint, close normally)."""
        close_envs(self.envs, self.cfg.env, abort=not isinstance(error, Interrupted))

    def train(self) -> TrainResult:
        """Run to the end (holding the run directory), evaluate, write ``result.json``."""
        with self.lock, blas_threads(1):
            self.prior = self.prior_result()
            train_steps(self, self.learner, self.progress, self.run_spec())
            return self.final_result()

    def prior_result(self) -> dict | None:
        """A resumed finished run's result (its final evaluation stands; an extension keeps it), else None."""
        found = self.resumed and finished_result(self.run_dir, self.progress.env_steps, self.cfg.env, self.cfg.seed)
        done = self.progress.updates_done >= self.cfg.num_updates
        if found and not done:
            self.parts.evaluations.adopt_final(found, self.progress.env_steps)
        return found if found and done else None

    def run_spec(self) -> RunSpec:
        """How the run loop runs this trainer: its log, hparams and schedule."""
        cfg = self.cfg
        schedule = Schedule(cfg.num_updates, cfg.learning_rate, cfg.anneal_lr, cfg.checkpoint_every_updates,
                            progress_total=cfg.num_updates * cfg.batch_size)
        return RunSpec(self.run_dir, cfg.to_dict(), cfg.variant, cfg.shown_hparams(), schedule, self.resumed,
                       cfg.progress)

    def final_result(self) -> TrainResult:
        """After the last update: the result with the final evaluation (or a resumed finished run's own)."""
        evaluations = self.parts.evaluations
        if self.prior is not None:  # a finished run resumed: its final evaluation stands (logged once)
            evaluations.history[:] = [tuple(e) for e in self.prior["eval_history"]]
            seconds = self.prior.get("eval_seconds")  # checked: one per evaluation, or missing
            evaluations.seconds[:] = [float("nan")] * len(evaluations.history) if seconds is None else seconds
            mean, std = (float("nan") if self.prior.get(k) is None else self.prior[k]
                         for k in ("eval_return_mean", "eval_return_std"))
        elif self.cfg.eval_episodes:
            mean, std = evaluations.history[-1][1:]
        else:
            mean = std = float("nan")
        return self.result(mean, std)

    def result(self, mean: float, std: float) -> TrainResult:
        """The finished run's result (final evaluation ``mean`` +- ``std``), written to ``result.json``."""
        cfg, progress, evaluations = self.cfg, self.progress, self.parts.evaluations
        sps = progress.env_steps / progress.seconds if progress.seconds else 0.0
        result = TrainResult(cfg.env, cfg.seed, progress.env_steps, sps, mean, std, str(self.run_dir), cfg.variant,
                             progress.updates_done, list(evaluations.history), list(evaluations.seconds), self.agent,
                             float(np.mean(self.parts.episodes.recent)) if self.parts.episodes.recent else float("nan"))
        write_result(self.run_dir, result.to_json())
        return result

    def _evaluate(self, logger: Logger) -> EvalResult:
        """Deterministic evaluation of the current policy on its own env and seeds (the training
        envs and random streams are untouched)."""
        cfg = self.cfg
        self.agent.actor = self.model.snapshot()
        evaluation = self.agent.evaluate(cfg.env, cfg.eval_episodes, seed=self.eval_seed(),
                                         max_steps=cfg.eval_max_steps or None, env_kwargs=cfg.env_options,
                                         wrappers=cfg.env_wrappers)
        self.record_evaluation(evaluation, logger)
        return evaluation

    def eval_seed(self) -> int:
        """The first evaluation episode's seed (episode i: this + i), apart from every training seed."""
        return self.cfg.seed + EVAL_SEED_OFFSET

    def record_evaluation(self, evaluation: EvalResult, logger: Logger) -> None:
        """Log an evaluation of the current policy and add it to the run's history."""
        steps = self.progress.env_steps
        logger.scalars({"eval/return_mean": evaluation.mean, "eval/return_std": evaluation.std,
                        "eval/capped_episodes": float(evaluation.capped)}, steps)
        self.parts.evaluations.history.append((steps, evaluation.mean, evaluation.std))
        self.parts.evaluations.seconds.append(self.progress.seconds)

    def episode_stats(self) -> dict[str, float]:
        finished = self.parts.episodes.pop()
        if not finished:
            return {}
        returns, lengths = zip(*finished)
        return {"charts/episodic_return": float(np.mean(returns)), "charts/episodic_length": float(np.mean(lengths))}


def train(cfg: TrainConfig) -> TrainResult:
    """Train (or resume, with ``cfg.resume``) and evaluate; see :class:`TrainResult`."""
    return PPOTrainer(cfg).train()


def resume(run_dir: str, **changes: object) -> TrainResult:
    """Continue a run from its newest valid checkpoint, e.g. ``resume(path, total_steps=2_000_000)``
    to extend it; only the :data:`rlkit.gym.checkpoint.RESUMABLE` fields may change."""
    if trained_in_population(run_dir):
        raise ConfigError(f"{run_dir} was trained in a population: continue it with rlkit.resume_population([...]) "
                          "(alone, as a population of one), which keeps its numbers")
    return PPOTrainer(TrainConfig(resume=str(run_dir)), changes).train()
