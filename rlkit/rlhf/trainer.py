"""RLHF with the one PPO core: token-level LLM environment, LM policy, shared update.

Per iteration: every sub-env gets a prompt and the policy writes one response per sub-env,
one token per env step, with a batched KV cache; the env scores finished responses. The
frozen reference gives per-token log-probs in one batched pass, the KL penalty
``-beta * KL`` is added to each token's reward, :func:`compute_gae` runs on the ``[T, N]``
token grid (gamma = 1, lambda = 0.95 by default), and :func:`ppo_epochs` updates the policy
and value head with minibatches made of whole sequences. Variants plug in as for the
Gymnasium trainer (update hooks, a batch source); the loop is :mod:`rlkit.core.loop`'s.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch

from rlkit.core.buffer import Batch
from rlkit.core.device import torch_device
from rlkit.core.learner import Progress
from rlkit.core.loop import Iteration, RunSpec, Schedule, train_steps
from rlkit.core.optim import FlatParameters
from rlkit.core.update import explained_variance, ppo_epochs
from rlkit.fast import select_kernels
from rlkit.errors import ConfigError, OutputError, one_line
from rlkit.io.checkpoint import save_file
from rlkit.io.logger import Logger
from rlkit.io.run import RunDir, open_run_dir, timestamp, write_result
from rlkit.io.threads import seed_and_threads
from rlkit.rlhf.build import (build_reward, build_tokenizer, checkpointed_forward, enable_gradient_checkpointing,
                              load_policy, read_prompts, uses_reference, wrap_policy)
from rlkit.rlhf.checkpoint import RandomStreams, RLHFParts, config_from_checkpoint, load_rlhf, save_rlhf
from rlkit.rlhf.prompts import PromptData, prompt_texts, read_prompt_data
from rlkit.rlhf.config import RLHFConfig
from rlkit.rlhf.kl import AdaptiveKL, kl_penalty
from rlkit.rlhf.policy import LMActorCritic, token_log_probs
from rlkit.rlhf.reward_model import RewardModelScorer
from rlkit.rlhf.rewards import PendingScore, RewardFunctionError, RewardSet, resolve_reward_paths
from rlkit.rlhf.token_grid import FreshGrid, LMRollout, SequenceMinibatch, TokenGrid, left_pad, sequence_minibatches
from rlkit.variants.plugged import build_learner
from rlkit_envs.token_env import TokenEnv

ExtraMetrics = Callable[[list[str], list[str]], dict[str, float]]

PROMPT_STREAM_STRIDE = 100_003
"""Sub-env i's prompt stream is seeded ``seed * PROMPT_STREAM_STRIDE + i`` (a prime above any env count)."""

__all__ = ["RLHFResult", "RLHFTrainer", "read_prompts", "train_rlhf"]


@dataclass
class RLHFResult:
    iterations: int
    tokens_per_second: float
    run_dir: str
    history: list[dict[str, float]] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        first, last = (self.history[0], self.history[-1]) if self.history else ({}, {})
        return {"iterations": self.iterations, "tokens_per_second": self.tokens_per_second, "run_dir": self.run_dir,
                "score_first": first.get("charts/score"), "score_last": last.get("charts/score"),
                "kl_last": last.get("charts/kl")}


class RLHFTrainer:
    """Composes an :class:`LMActorCritic`, token envs, a frozen reference and the shared PPO update."""

    def __init__(self, cfg: RLHFConfig, reward: Any = None, policy: torch.nn.Module | None = None,
                 tokenizer: Any = None, prompts: list[str] | None = None, extra_metrics: ExtraMetrics | None = None,
                 changes: dict[str, Any] | None = None):
        """``changes``: with ``cfg.resume``, the resumable fields to change (see
        :data:`rlkit.rlhf.checkpoint.RESUMABLE`: more iterations, moved models or prompts)."""
        # A resumed run is locked before anything of it is read: a second process is refused first.
        early = open_run_dir(cfg.logdir, None, "", cfg.resume) if cfg.resume else None
        with early.lock.released_on_error() if early else contextlib.nullcontext():
            self._set_up(cfg, reward, policy, tokenizer, prompts, extra_metrics, changes, early)

    def _set_up(self, cfg: RLHFConfig, reward: Any, policy: torch.nn.Module | None, tokenizer: Any,
                prompts: list[str] | None, extra_metrics: ExtraMetrics | None, changes: dict[str, Any] | None,
                early: RunDir | None) -> None:
        stored = None
        if cfg.resume:  # the run's own config; weights and random streams are restored at the end
            if changes and "reward" in changes:
                changes = {**changes, "reward": resolve_reward_paths(changes["reward"])}
            cfg, stored = config_from_checkpoint(cfg.resume, changes)
        else:  # store where the inputs are, so the run resumes from any working directory
            cfg = cfg.replace(**{k: str(Path(v).resolve()) for k in ("policy", "reward_model", "prompts")
                                 if (v := getattr(cfg, k)) and Path(v).exists()}, reward=resolve_reward_paths(cfg.reward))
        self.cfg, self.resumed = cfg, stored is not None
        seed_and_threads(cfg.seed, cfg.torch_threads)
        self.device = torch_device(cfg.device)
        self.compute_dtype = getattr(torch, cfg.dtype)
        policy = load_policy(cfg, policy, self.device)
        self.tokenizer, self.extra_metrics = build_tokenizer(cfg, tokenizer), extra_metrics
        reward = build_reward(cfg, reward, self.tokenizer, self.device)
        self.scorer = reward if isinstance(reward, RewardModelScorer) else None
        self.rewards = reward if isinstance(reward, RewardSet) else None
        self.eos = self.tokenizer.eos_token_id
        policy, self.reference, self.peft = wrap_policy(cfg, policy, self.device)
        if cfg.gradient_checkpointing:
            enable_gradient_checkpointing(policy)
        # eval(): no dropout, so acting, the KL pass and the training forward compute the same function.
        self.model = LMActorCritic(policy.eval(), cfg.temperature, cfg.separate_critic,
                                   critic=cfg.variants.critic).to(self.device)
        actor = self.model.actor_parameters()
        flat = FlatParameters(actor + self.model.critic_parameters(), split=sum(p.numel() for p in actor))
        self.kernels = select_kernels(cfg.kernels, small_mlp=False, device=self.device)
        self.data = PromptData(list(prompts), {}) if prompts is not None else read_prompt_data(cfg.prompts)
        envs = self._make_envs(prompt_texts(self.data, self.tokenizer, cfg.chat_template, cfg.system_prompt), reward)
        self.parts = RLHFParts(envs, AdaptiveKL(cfg.kl_coef, cfg.kl_target, cfg.kl_horizon), [])
        self.learner, self.group_size = build_learner("rlhf", cfg, flat,
                                                      self.kernels.adam(flat, cfg.learning_rate, cfg.adam_eps),
                                                      self.device, self.model, FreshGrid())
        if self.learner.objective.needs_dist_params:
            raise ConfigError(f"the objective {self.learner.objective.name!r} needs the behaviour policy's whole "
                              "distribution at every token, which the RLHF trainer does not keep (vocabulary-sized "
                              "logits); use it with the Gymnasium trainer")
        self.kernels.announce(self.learner.objective)
        self.run_dir, self.lock = early or open_run_dir(cfg.logdir, cfg.run_name,
                                                        f"rlhf__{cfg.variant}__s{cfg.seed}__{timestamp()}", None)
        with self.lock.released_on_error():
            # (a run stopped before its first checkpoint starts again: nothing stored to load)
            self.progress = load_rlhf(self.run_dir, stored, self.learner, self.parts) if stored and stored.state \
                else Progress()

    def _make_envs(self, prompts: list[str], reward: Any) -> list[TokenEnv]:
        """The sub-envs; with reward functions each holds the score the trainer gives it in batch."""
        cfg, lm_config = self.cfg, self.model.lm.config
        self.pending = [PendingScore() for _ in range(cfg.num_envs)] if self.rewards is not None else []
        envs = [TokenEnv(prompts, self.pending[i] if self.pending else reward, lm_config.vocab_size, self.eos, cfg.max_new_tokens, tokenizer=self.tokenizer,
                         missing_eos_penalty=cfg.missing_eos_penalty, pad_token_id=0,
                         model_context=getattr(lm_config, "max_position_embeddings", None))
                for i in range(cfg.num_envs)]
        for i, env in enumerate(envs):
            env.reset(seed=cfg.seed * PROMPT_STREAM_STRIDE + i)  # seeds each sub-env's prompt stream once
        return envs

    @property
    def iteration(self) -> int:
        """Iterations done (one rollout and one update each)."""
        return self.progress.updates_done

    def autocast(self) -> contextlib.AbstractContextManager:
        """The models' forward passes run under this: autocast to ``cfg.dtype`` unless float32."""
        if self.compute_dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.compute_dtype)

    # ----------------------------------------------------------------------------- rollout
    @torch.no_grad()
    def collect(self) -> tuple[TokenGrid, np.ndarray, np.ndarray]:
        """One response per sub-env (batched KV-cache sampling); returns the grid with the env's
        rewards, and each response's score and EOS flag."""
        device, n, steps = self.device, self.cfg.num_envs, self.cfg.max_new_tokens
        prompts, rows, index = [], [], 0
        for i, env in enumerate(self.parts.envs):  # each group of group_size sub-envs answers its first env's prompt
            obs, info = env.reset() if i % self.group_size == 0 else env.reset(options={"prompt": index})
            index = info["prompt_index"]
            rows.append(index)
            prompts.append(obs["input_ids"][: int(obs["attention_mask"].sum())].tolist())
        ids, mask, width = left_pad(prompts, steps, device)
        f = {k: torch.zeros(steps, n, device=device) for k in ("log_probs", "values", "rewards", "final_values")}
        # values and final_values are filled after the rollout (one batched pass, see update()).
        actions = torch.zeros(steps, n, dtype=torch.long, device=device)
        b = {k: torch.zeros(steps, n, dtype=torch.bool, device=device) for k in ("terminated", "dones", "valid")}
        active = np.ones(n, bool)
        scores, eos = np.zeros(n), np.zeros(n, bool)
        state, logits = self.model.start(ids[:, :width], mask[:, :width])
        for t in range(steps):
            tokens = self.model.head.sample(logits, self.learner.generator)
            ids[:, width + t] = tokens
            actions[t] = tokens
            f["log_probs"][t] = self.model.head.log_prob(logits, tokens)
            b["valid"][t] = torch.as_tensor(active, device=device)
            if self.scorer is not None or self.rewards is not None:  # score the responses ending now in one batch
                ending = [i for i in np.flatnonzero(active) if int(tokens[i]) == self.eos or t + 1 == steps]
                sequences = [ids[i, width - len(prompts[i]): width + t + 1].tolist() for i in ending]
                if self.scorer is not None:
                    self.scorer.prefetch(sequences)
                elif ending:
                    self._pend_rewards(ending, sequences, [len(prompts[i]) for i in ending], rows)
            for i in np.flatnonzero(active):
                _, reward, terminated, truncated, info = self.parts.envs[i].step(int(tokens[i]))
                if terminated or truncated:
                    f["rewards"][t, i] = reward
                    b["terminated"][t, i], b["dones"][t, i] = terminated, True
                    scores[i], eos[i], active[i] = info["score"], terminated, False
            if not active.any():
                break
            logits = self.model.advance(state, tokens)
        grid = TokenGrid(ids, mask, width, actions, f["log_probs"], f["values"], f["rewards"], f["final_values"],
                         b["terminated"], b["dones"], b["valid"])
        return grid, scores, eos

    def _pend_rewards(self, ending: list[int], sequences: list[list[int]], prompt_lengths: list[int],
                      rows: list[int]) -> None:
        """Score the responses of sub-envs ``ending`` with the reward functions (their rows' prompts
        and columns) and hand each env its score."""
        assert self.rewards is not None
        completions = [self.tokenizer.decode(s[n:], skip_special_tokens=True) for s, n in zip(sequences, prompt_lengths)]
        of = [rows[i] for i in ending]
        scored = self.rewards.score([self.data.prompts[r] for r in of], completions, self.data.rows(of), sequences)
        for i, value in zip(ending, scored.total.tolist()):
            self.pending[i].value = value

    # ------------------------------------------------------------------------------ update
    @torch.no_grad()
    def score_rollout(self, grid: TokenGrid) -> tuple[LMRollout, torch.Tensor, torch.Tensor]:
        """Policy log-probs, values and bootstrap values of truncated responses in one batched pass;
        the reference's log-probs by the same computation, so the KL is exactly 0 at the start
        (as TRL does). These log-probs are the ratio's behaviour log-probs; they equal the ones
        sampled with the KV cache to ~1e-7 (tested). Returns the rollout with KL-shaped rewards,
        the per-token KL ``[n]`` and each valid token's sequence index ``[n]``."""
        rows, cols = grid.transitions()
        vt = cols - grid.prompt_width
        trunc_t, trunc_n = (grid.dones & ~grid.terminated).nonzero(as_tuple=True)
        with self.autocast():
            log_probs, values, final_values = self.model.evaluate_tokens(
                grid.ids, grid.mask, rows, cols, trunc_n, grid.prompt_width + trunc_t, grid.prompt_width)
            ref = (self.reference_log_probs(grid.ids, grid.mask, rows, cols, grid.prompt_width)
                   if uses_reference(self.cfg) else log_probs)  # no penalty: no reference pass, KL 0
        kl_tokens = kl_penalty(log_probs, ref, self.cfg.kl_estimator)
        shaped = grid.rewards.clone()
        shaped[vt, rows] -= self.parts.kl.beta * kl_tokens
        behaviour, value_grid, final_grid = (torch.zeros_like(grid.log_probs) for _ in range(3))
        behaviour[vt, rows], value_grid[vt, rows] = log_probs, values
        final_grid[trunc_t, trunc_n] = final_values
        scored = replace(grid, log_probs=behaviour, values=value_grid, final_values=final_grid, rewards=shaped)
        return LMRollout(scored, grid.rewards), kl_tokens, rows

    def optimize(self, train_grid: TokenGrid) -> dict[str, float]:
        """The shared PPO epochs on ``train_grid`` with minibatches of whole sequences."""
        cfg, learner = self.cfg, self.learner
        batch = train_grid.batch(cfg.gamma, cfg.gae_lambda)
        t_rows, t_cols = batch.obs[:, 0], batch.obs[:, 1]

        def epoch_minibatches() -> Iterator[SequenceMinibatch]:
            return sequence_minibatches(t_rows, train_grid.num_sequences, cfg.num_minibatches, learner.generator)

        def forward(mb: SequenceMinibatch) -> tuple[torch.Tensor, torch.Tensor, Batch]:
            with self.autocast(), checkpointed_forward(self.model.lm, cfg.gradient_checkpointing):
                logits, values = self.model.forward_tokens(train_grid.ids[mb.sequences], train_grid.mask[mb.sequences],
                                                           mb.local_rows, t_cols[mb.transitions],
                                                           train_grid.prompt_width)
            return logits, values, batch.map(lambda x: x[mb.transitions])._replace(segments=mb.local_rows)

        stats = ppo_epochs(epoch_minibatches, forward, self.model.head, learner.flat, learner.optimizer, cfg.ppo,
                           self.progress.updates_done + 1, self.kernels.loss, learner.objective)
        stats["losses/explained_variance"] = explained_variance(batch.returns, batch.values)
        return stats

    def update(self) -> dict[str, float]:
        """Rollout, KL-shaped rewards, batch source (the rollout, or HP3O's hybrid grid), shared PPO epochs."""
        cfg, kl = self.cfg, self.parts.kl
        start = time.perf_counter()
        streams = RandomStreams.take(self.learner, self.parts.envs)
        try:
            with self.autocast():
                grid, scores, eos = self.collect()
        except RewardFunctionError as exc:
            raise self._stopped_by(exc, streams) from None
        rollout_seconds = time.perf_counter() - start
        rollout, kl_tokens, rows = self.score_rollout(grid)
        train_grid, stats = self.learner.source.batches(rollout, self.progress.updates_done)
        stats.update(self.learner.passes(train_grid, self.optimize))
        seq_kl = torch.zeros(cfg.num_envs, device=self.device).index_add_(0, rows, kl_tokens)
        if uses_reference(cfg):
            kl.update(float(seq_kl.mean()), cfg.num_envs)
            stats.update({"charts/kl": float(seq_kl.mean()), "charts/kl_coef": kl.beta,
                          "charts/non_score_reward": float(-kl.beta * seq_kl.mean())})
        lengths = rollout.grid.valid.sum(0).float()
        seconds = time.perf_counter() - start
        stats.update({
            "charts/score": float(scores.mean()),
            "charts/response_length": float(lengths.mean()), "charts/response_length_min": float(lengths.min()),
            "charts/response_length_max": float(lengths.max()), "charts/truncated_share": float(1 - eos.mean()),
            "charts/eos_rate": float(eos.mean()),
            "charts/tokens": float(lengths.sum()),
            "charts/tokens_per_second": float(lengths.sum()) / seconds,
            "charts/rollout_tokens_per_second": float(lengths.sum()) / rollout_seconds,
        })
        self.last_grid = rollout.grid
        if self.rewards is not None:
            stats.update(self.rewards.take_stats())
        if self.extra_metrics is not None:
            prompts, responses = self.decode(rollout.grid)
            stats.update({f"charts/{k}": v for k, v in self.extra_metrics(prompts, responses).items()})
        return stats

    def _stopped_by(self, error: RewardFunctionError, streams: RandomStreams) -> RewardFunctionError:
        """The run as it stood before this iteration's rollout, checkpointed (unless that checkpoint
        exists), and the error saying how to continue once the function is fixed."""
        streams.restore(self.learner, self.parts.envs)
        name = f"iteration-{self.progress.updates_done:06d}"
        if not (self.run_dir / "checkpoints" / name).is_dir():
            self.save(False)
        stopped = RewardFunctionError(f"{error}; the run stopped with checkpoint {name}: fix the function (or the "
                                      f"data) and continue with rlkit rlhf --resume {shlex.quote(str(self.run_dir))}")
        stopped.resumable = True  # the command line adds what a resume was given (rlkit.cli_flags.resume_flags)
        return stopped

    def reference_log_probs(self, ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor,
                            cols: torch.Tensor, prompt_width: int) -> torch.Tensor:
        if self.peft is None:
            return token_log_probs(self.reference, ids, mask, rows, cols, self.cfg.temperature, prompt_width)
        with self.peft.disable_adapter():
            return token_log_probs(self.model.lm, ids, mask, rows, cols, self.cfg.temperature, prompt_width)

    def decode(self, grid: TokenGrid) -> tuple[list[str], list[str]]:
        """Prompt and response texts of each sequence in ``grid``."""
        prompts, responses = [], []
        for i in range(grid.num_sequences):
            prompt = grid.ids[i, :grid.prompt_width][grid.mask[i, :grid.prompt_width].bool()]
            response = grid.actions[:, i][grid.valid[:, i]]
            prompts.append(self.tokenizer.decode(prompt.tolist()))
            responses.append(self.tokenizer.decode(response.tolist(), skip_special_tokens=True))
        return prompts, responses

    # -------------------------------------------------------------------- what the loop calls
    def iterate(self) -> Iteration:
        stats = self.update()
        postfix = f"tok/s={stats['charts/tokens_per_second']:.0f} score={stats['charts/score']:.3g}"
        if "charts/kl" in stats:
            postfix += f" kl={stats['charts/kl']:.3g}"
        return Iteration(stats, int(stats.pop("charts/tokens")), postfix)

    def after_update(self, stats: dict[str, float], logger: Logger) -> None:
        self.parts.history.append(stats)

    def save(self, scheduled: bool) -> Path:
        """Any checkpoint continues exactly (the run holds no episode across iterations)."""
        return save_rlhf(self.run_dir, self.cfg, self.learner, self.progress, self.parts)

    def after_checkpoint(self) -> None:
        """Nothing: a checkpoint does not change how the run goes on."""

    def finish(self, logger: Logger) -> None:
        """Nothing: the run owns no environment processes."""

    def abort(self, error: BaseException) -> None:
        """Nothing: the run owns no environment processes."""

    def train(self) -> RLHFResult:
        """Run to the end (holding the run directory), save the policy, write ``result.json``."""
        with self.lock:
            cfg, progress = self.cfg, self.progress
            schedule = Schedule(cfg.iterations, cfg.learning_rate, cfg.anneal_lr, cfg.checkpoint_every_updates,
                                log_by_updates=True)
            train_steps(self, self.learner, progress, RunSpec(self.run_dir, cfg.to_dict(), cfg.variant,
                                                              cfg.shown_hparams(), schedule, self.resumed,
                                                              cfg.progress))
            if cfg.save_model:
                self._save_policy()
            result = RLHFResult(progress.updates_done, progress.env_steps / progress.seconds if progress.seconds else 0.0,
                                str(self.run_dir), list(self.parts.history))
            write_result(self.run_dir, result.to_json())
            return result


    def _save_policy(self) -> None:
        """``policy.safetensors``: written to a temporary file renamed into place (never seen
        half-written); a failure (a full disk, a file made immutable) is one line naming it. Tensors
        that are one tensor under two names (tied input and output embeddings, as SmolLM2's) are
        written as copies: safetensors refuses them, and loading gives each key its own values anyway.
        The other weights are views of the flat parameter vector, each its own memory: none is copied."""
        state, seen = {}, set()
        for k, v in self.model.state_dict().items():
            tensor = v.detach().cpu().contiguous()
            state[f"model.{k}"] = tensor.clone() if tensor.data_ptr() in seen else tensor
            seen.add(tensor.data_ptr())
        tmp, final = self.run_dir / ".policy.safetensors.tmp", self.run_dir / "policy.safetensors"
        try:
            save_file(state, str(tmp))
            os.replace(tmp, final)
        except Exception as exc:  # safetensors raises its own error type on a full disk
            tmp.unlink(missing_ok=True)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else one_line(exc)
            raise OutputError(f"could not write {final}: {reason} (the checkpoints, if any, are intact)") from None


def train_rlhf(cfg: RLHFConfig, **components: Any) -> RLHFResult:
    """Run RLHF; ``components`` may pass ``reward``, ``policy``, ``tokenizer``, ``prompts``, ``extra_metrics``."""
    return RLHFTrainer(cfg, **components).train()
