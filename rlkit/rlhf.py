"""RLHF with the one PPO core: token-level LLM environment, LM policy, shared update (issue #4).

Per iteration: every sub-env gets a prompt and the policy writes one response per sub-env,
one token per env step, with a batched KV cache; the env scores finished responses. The
frozen reference gives per-token log-probs in one batched pass, the KL penalty
``-beta * KL`` is added to each token's reward, :func:`compute_gae` runs on the ``[T, N]``
token grid (gamma = 1, lambda = 0.95 by default), and :func:`ppo_epochs` updates the policy
and value head with minibatches made of whole sequences.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch
from safetensors.torch import save_file

from rlkit.agent import torch_device
from rlkit.buffer import Batch
from rlkit.hp3o import TrajectoryBuffer
from rlkit.lm import AdaptiveKL, LMActorCritic, kl_penalty, token_log_probs
from rlkit.logger import Logger
from rlkit.optim import FlatParameters, make_adam
from rlkit.outer import OuterStep
from rlkit.checkpoint import new_run_dir, run_dir_of
from rlkit.rlhf_checkpoint import config_from_checkpoint, load_rlhf, save_rlhf
from rlkit.rlhf_config import ConfigError, RLHFConfig
from rlkit.token_grid import (SequenceMinibatch, TokenGrid, grid_from_records, left_pad, records_from_grid,
                              sequence_minibatches)
from rlkit.update import explained_variance, ppo_epochs

ExtraMetrics = Callable[[list[str], list[str]], dict[str, float]]


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


def read_prompts(path: str) -> list[str]:
    """Prompts from a .txt (one per line) or .jsonl (``{"prompt": ...}``) file."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"prompt file {path!r} not found")
    lines = [line for line in file.read_text().splitlines() if line.strip()]
    prompts = [json.loads(line)["prompt"] for line in lines] if file.suffix == ".jsonl" else lines
    if not prompts:
        raise ConfigError(f"prompt file {path!r} is empty")
    return prompts


class RLHFTrainer:
    """Composes an :class:`LMActorCritic`, token envs, a frozen reference and the shared PPO update."""

    def __init__(self, cfg: RLHFConfig, reward: Any = None, policy: torch.nn.Module | None = None,
                 tokenizer: Any = None, prompts: list[str] | None = None, extra_metrics: ExtraMetrics | None = None):
        from envs.score_norm import NORMALIZATION_FILE, ScoreNormalization
        from envs.token_env import RewardModelScorer, TokenEnv, load_model

        if cfg.hp3o_plus:
            raise ConfigError("hp3o_plus needs a state distance; the LLM trainer offers plain HP3O only")
        resumed = None
        if cfg.resume:  # the run's own config; weights and random streams are restored at the end
            cfg, *resumed = config_from_checkpoint(cfg.resume)
        self.cfg = cfg
        torch.manual_seed(cfg.seed)
        torch.set_num_threads(cfg.torch_threads)
        self.device = torch_device(cfg.device)
        dtype = getattr(torch, cfg.dtype)
        if policy is None:
            policy = load_model(cfg.policy, "causal-lm", torch.float32, str(self.device))
        # Mixed precision: float32 master weights (the reference is copied from them, so the KL
        # is exactly 0 at the start in every dtype); matmuls in `dtype` under autocast. Measured on
        # a tiny LM: pure-bf16 weights at lr 1e-5 left 86% of them unchanged after 3 updates.
        policy = policy.float()
        self.compute_dtype = dtype
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(cfg.policy)
        if reward is None:
            if not cfg.reward_model:
                raise ConfigError("no reward: set reward_model or pass reward= (a callable (prompts, responses) -> scores)")
            norm_file = Path(cfg.reward_model) / NORMALIZATION_FILE
            reward = RewardModelScorer(load_model(cfg.reward_model, "seq-cls", dtype, str(self.device)), tokenizer,
                                       normalization=ScoreNormalization.load(norm_file) if norm_file.is_file() else None)
        prompts = prompts if prompts is not None else read_prompts(cfg.prompts)
        self.tokenizer, self.extra_metrics = tokenizer, extra_metrics
        self.scorer = reward if isinstance(reward, RewardModelScorer) else None
        self.eos = tokenizer.eos_token_id
        self.peft = None
        if cfg.lora_r:
            # LoRA (peft): only the adapters train; the reference is the same weights with the
            # adapters disabled, so there is one copy of the model.
            from peft import LoraConfig, get_peft_model

            self.peft = get_peft_model(policy, LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=0.0,
                                                          target_modules=list(cfg.lora_targets) or "all-linear"))
            policy, self.reference = self.peft.get_base_model(), None
        else:
            self.reference = copy.deepcopy(policy).to(self.device).eval().requires_grad_(False)
            policy.requires_grad_(True)
        # eval(): no dropout, so acting, the KL pass and the training forward compute the same function.
        self.model = LMActorCritic(policy.eval(), cfg.temperature, cfg.separate_critic).to(self.device)
        actor = self.model.actor_parameters()
        self.flat = FlatParameters(actor + self.model.critic_parameters(), split=sum(p.numel() for p in actor))
        self.optimizer = make_adam(self.flat, cfg.learning_rate)
        self.outer = OuterStep.from_options(self.flat, cfg)
        vocab = self.model.lm.config.vocab_size
        self.envs = [TokenEnv(prompts, reward, vocab, tokenizer.eos_token_id, cfg.max_new_tokens, tokenizer=tokenizer,
                              missing_eos_penalty=cfg.missing_eos_penalty, pad_token_id=0,
                              model_context=getattr(self.model.lm.config, "max_position_embeddings", None))
                     for _ in range(cfg.num_envs)]
        for i, env in enumerate(self.envs):
            env.reset(seed=cfg.seed * 100_003 + i)  # seeds each sub-env's prompt stream once
        self.kl = AdaptiveKL(cfg.kl_coef, cfg.kl_target, cfg.kl_horizon)
        # HP3O on the LLM env: the FIFO holds whole responses; minibatches stay whole sequences.
        self.hp3o = TrajectoryBuffer(cfg.hp3o_buffer_size) if cfg.hp3o else None
        self.rng = np.random.default_rng(cfg.seed)
        self.generator = torch.Generator(self.device).manual_seed(cfg.seed)
        self.iteration = 0
        self.history: list[dict[str, float]] = []
        self.tokens = self.seconds = 0.0
        if resumed:
            self.run_dir = run_dir_of(cfg.resume)
            self.history, self.tokens, self.seconds = load_rlhf(self, *resumed)
        else:
            name = cfg.run_name or f"rlhf__{cfg.variant}__s{cfg.seed}__{time.strftime('%Y%m%d-%H%M%S')}"
            self.run_dir = new_run_dir(cfg.logdir, name)

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
        prompts = []
        for env in self.envs:
            obs, _ = env.reset()
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
            tokens = self.model.head.sample(logits, self.generator)
            ids[:, width + t] = tokens
            actions[t] = tokens
            f["log_probs"][t] = self.model.head.log_prob(logits, tokens)
            b["valid"][t] = torch.as_tensor(active, device=device)
            if self.scorer is not None:  # score every response that ends at this step in one batch
                ending = [i for i in np.flatnonzero(active) if int(tokens[i]) == self.eos or t + 1 == steps]
                self.scorer.prefetch([ids[i, width - len(prompts[i]): width + t + 1].tolist() for i in ending])
            for i in np.flatnonzero(active):
                _, reward, terminated, truncated, info = self.envs[i].step(int(tokens[i]))
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

    # ------------------------------------------------------------------------------ update
    def update(self) -> dict[str, float]:
        """Rollout, KL-shaped rewards, batch source (the rollout, or HP3O's hybrid grid), shared PPO epochs."""
        cfg = self.cfg
        start = time.perf_counter()
        with self.autocast():
            grid, scores, eos = self.collect()
        rollout_seconds = time.perf_counter() - start
        rows, cols = grid.transitions()
        vt = cols - grid.prompt_width
        # Policy log-probs, values and bootstrap values of truncated responses in one batched pass;
        # the reference's log-probs by the same computation, so the KL is exactly 0 at the start
        # (as TRL does). These log-probs are the ratio's behaviour log-probs; they equal the ones
        # sampled with the KV cache to ~1e-7 (tested).
        trunc_t, trunc_n = (grid.dones & ~grid.terminated).nonzero(as_tuple=True)
        with self.autocast():
            log_probs, values, final_values = self.model.evaluate_tokens(
                grid.ids, grid.mask, rows, cols, trunc_n, grid.prompt_width + trunc_t)
            ref = self.reference_log_probs(grid.ids, grid.mask, rows, cols)
        kl_tokens = kl_penalty(log_probs, ref, cfg.kl_estimator)
        env_rewards = grid.rewards
        shaped = env_rewards.clone()
        shaped[vt, rows] -= self.kl.beta * kl_tokens
        behaviour, value_grid, final_grid = (torch.zeros_like(grid.log_probs) for _ in range(3))
        behaviour[vt, rows], value_grid[vt, rows] = log_probs, values
        final_grid[trunc_t, trunc_n] = final_values
        grid = replace(grid, log_probs=behaviour, values=value_grid, final_values=final_grid, rewards=shaped)
        stats: dict[str, float] = {}
        if self.hp3o is not None:  # HP3O: train on the best stored response plus k - 1 random ones
            self.hp3o.add(records_from_grid(grid, env_rewards, self.iteration))
            picked = [self.hp3o.items[i] for i in self.hp3o.sample(cfg.hp3o_trajectories, self.rng)]
            stats.update({"hp3o/buffer_fill": float(len(self.hp3o)), "hp3o/best_return": picked[0].episode_return,
                          "hp3o/sampled_age": float(np.mean([self.iteration - r.finished_update for r in picked]))})
            train_grid = grid_from_records(picked, self.device)
        else:
            train_grid = grid
        batch = train_grid.batch(cfg.gamma, cfg.gae_lambda)
        t_rows, t_cols = batch.obs[:, 0], batch.obs[:, 1]

        def epoch_minibatches() -> Iterator[SequenceMinibatch]:
            return sequence_minibatches(t_rows, train_grid.num_sequences, cfg.num_minibatches, self.generator)

        def forward(mb: SequenceMinibatch) -> tuple[torch.Tensor, torch.Tensor, Batch]:
            with self.autocast():
                logits, values = self.model.forward_tokens(train_grid.ids[mb.sequences],
                                                           train_grid.mask[mb.sequences], mb.local_rows,
                                                           t_cols[mb.transitions])
            return logits, values, Batch(*(x[mb.transitions] for x in batch))

        if self.outer:
            self.outer.begin()
        stats.update(ppo_epochs(epoch_minibatches, forward, self.model.head, self.flat, self.optimizer, cfg,
                                self.iteration + 1))
        if self.outer:
            stats.update(self.outer.end())
        seq_kl = torch.zeros(cfg.num_envs, device=self.device).index_add_(0, rows, kl_tokens)
        self.kl.update(float(seq_kl.mean()), cfg.num_envs)
        lengths = grid.valid.sum(0).float()
        seconds = time.perf_counter() - start
        stats.update({
            "charts/score": float(scores.mean()), "charts/kl": float(seq_kl.mean()), "charts/kl_coef": self.kl.beta,
            "charts/non_score_reward": float(-self.kl.beta * seq_kl.mean()),
            "charts/response_length": float(lengths.mean()), "charts/eos_rate": float(eos.mean()),
            "charts/tokens_per_second": float(lengths.sum()) / seconds,
            "charts/rollout_tokens_per_second": float(lengths.sum()) / rollout_seconds,
            "losses/explained_variance": explained_variance(batch.returns, batch.values),
        })
        self.last_grid = grid
        if self.extra_metrics is not None:
            prompts, responses = self.decode(grid)
            stats.update({f"charts/{k}": v for k, v in self.extra_metrics(prompts, responses).items()})
        return stats

    def reference_log_probs(self, ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor,
                            cols: torch.Tensor) -> torch.Tensor:
        if self.peft is None:
            return token_log_probs(self.reference, ids, mask, rows, cols, self.cfg.temperature)
        with self.peft.disable_adapter():
            return token_log_probs(self.model.lm, ids, mask, rows, cols, self.cfg.temperature)

    def decode(self, grid: TokenGrid) -> tuple[list[str], list[str]]:
        """Prompt and response texts of each sequence in ``grid``."""
        prompts, responses = [], []
        for i in range(grid.num_sequences):
            prompt = grid.ids[i, :grid.prompt_width][grid.mask[i, :grid.prompt_width].bool()]
            response = grid.actions[:, i][grid.valid[:, i]]
            prompts.append(self.tokenizer.decode(prompt.tolist()))
            responses.append(self.tokenizer.decode(response.tolist(), skip_special_tokens=True))
        return prompts, responses

    # -------------------------------------------------------------------------------- loop
    def train(self) -> RLHFResult:
        cfg = self.cfg
        logger = Logger(str(self.run_dir), purge_step=self.iteration + 1 if cfg.resume else None)
        if not cfg.resume:
            logger.hparams({"variant": cfg.variant, **cfg.to_dict()}, ["charts/score", "charts/kl"])
            (self.run_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
        history = self.history
        try:
            while self.iteration < cfg.iterations:
                if cfg.anneal_lr:
                    self.optimizer.param_groups[0]["lr"] = cfg.learning_rate * (1 - self.iteration / cfg.iterations)
                start = time.perf_counter()
                stats = self.update()
                self.seconds += time.perf_counter() - start
                self.tokens += stats["charts/response_length"] * cfg.num_envs
                self.iteration += 1
                stats["charts/learning_rate"] = self.optimizer.param_groups[0]["lr"]
                logger.scalars(stats, self.iteration)
                history.append(stats)
                if cfg.checkpoint_every and (self.iteration % cfg.checkpoint_every == 0
                                             or self.iteration == cfg.iterations):
                    logger.flush()  # everything up to the checkpoint is on disk before it exists
                    save_rlhf(self, history, self.tokens, self.seconds)
        finally:
            logger.close()
        if cfg.save_model:
            state = {f"model.{k}": v for k, v in self.model.state_dict().items()}
            save_file({k: v.detach().cpu().contiguous() for k, v in state.items()},
                      str(self.run_dir / "policy.safetensors"))
        result = RLHFResult(self.iteration, self.tokens / self.seconds if self.seconds else 0.0, str(self.run_dir),
                            history)
        (self.run_dir / "result.json").write_text(json.dumps(result.to_json(), indent=1))
        return result


def train_rlhf(cfg: RLHFConfig, **components: Any) -> RLHFResult:
    """Run RLHF; ``components`` may pass ``reward``, ``policy``, ``tokenizer``, ``prompts``, ``extra_metrics``."""
    return RLHFTrainer(cfg, **components).train()
