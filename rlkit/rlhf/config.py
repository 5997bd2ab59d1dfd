"""Frozen configuration of RLHF runs on the token-level LLM environment.

The PPO hyperparameters are the shared :class:`rlkit.core.config.PPOConfig` with RLHF defaults
(gamma 1 over tokens, lr 1e-5, vf_coef 0.1, grad clip 1, no entropy bonus, no annealing).
Related fields form groups (the model, the responses, the KL penalty, the run, compute) that
``rlkit rlhf --help`` shows as such; they, the PPO fields and the variant options read, override
and serialize as flat fields.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from rlkit.core.composed import ComposedConfig, flat_init
from rlkit.core.config import (ONE_RESPONSE, PPOConfig, checkpoint_cadence, config_group, require_minibatches,
                               require_positive_int, require_resume_path, require_seed)
from rlkit.core.device import check_device
from rlkit.errors import ConfigError
from rlkit.variants import RLHFVariantGroups


def rlhf_ppo_defaults() -> PPOConfig:
    """PPO for language models: minibatches are whole sequences (num_minibatches divides num_envs)."""
    return PPOConfig(update_epochs=4, num_minibatches=2, learning_rate=1e-5, anneal_lr=False, gamma=1.0,
                     gae_lambda=0.95, ent_coef=0.0, vf_coef=0.1, max_grad_norm=1.0)


@config_group
class ModelOptions:
    """The trained model beside the policy: its critic and LoRA adapters."""

    separate_critic: bool = False
    """Value head on a separate critic trunk (a copy of the policy's) instead of the shared trunk."""
    lora_r: int = 0
    """LoRA rank (peft); 0 trains all weights. With LoRA the reference is the base model with adapters off."""
    lora_alpha: float = 16.0
    """LoRA scaling alpha."""
    lora_targets: tuple[str, ...] = ()
    """Module names to adapt (default: every linear layer but the output head)."""


@config_group
class ResponseOptions:
    """The responses of each iteration: how many, how long, how sampled and scored."""

    num_envs: int = 8
    """Sub-environments, i.e. responses generated per iteration."""
    max_new_tokens: int = 32
    """Response length limit (the episode is truncated there)."""
    temperature: float = 1.0
    """Sampling temperature, applied identically when acting and recomputing log-probs."""
    missing_eos_penalty: float | None = None
    """Added to the score of a response that ends without EOS (e.g. -1.0)."""


@config_group
class RewardOptions:
    """Reward functions beside (or instead of) the reward model, and the weights of the sum."""

    reward: tuple[str, ...] = ()
    """Reward functions, each module:function or path/to/file.py:function, called as
    f(prompts=..., completions=..., **columns) with the prompt data's other columns; one number (or
    None: does not apply) per completion. Repeatable: --reward a:f --reward b:g."""
    reward_weights: tuple[float, ...] = ()
    """One weight per reward source, the reward model first (when set), then each reward function
    in order (default: all 1)."""


@config_group
class PromptOptions:
    """How each prompt becomes the model's input."""

    chat_template: bool = False
    """Format each prompt with the tokenizer's chat template (generation prompt appended); a prompt
    that is a list of chat messages needs it."""
    system_prompt: str | None = None
    """A system message put before each prompt (with --chat-template)."""


@config_group
class KLOptions:
    """The per-token KL penalty against the frozen reference."""

    kl_coef: float = 0.05
    """beta: per-token KL penalty coefficient against the frozen reference."""
    kl_estimator: Literal["k1", "k3"] = "k1"
    """KL estimator: k1 = log pi - log ref, k3 = (r - 1) - log r with r = ref / pi."""
    kl_target: float | None = None
    """Adaptive beta (Ziegler et al. 2019): target KL per response; None keeps beta fixed."""
    kl_horizon: int = 10_000
    """Adaptive beta horizon in responses."""


@config_group
class RLHFRunOptions:
    """Where the run goes and what it keeps: its folder, checkpoints, resume, the trained model,
    progress bar."""

    logdir: str = "runs"
    """Directory under which each run gets its own folder."""
    run_name: str | None = None
    """Run folder name (default: rlhf__{variant}__s{seed}__{timestamp}, the timestamp as
    YYYYmmdd-HHMMSS; -2, -3, ... appended when that folder exists)."""
    resume: str | None = None
    """Continue a run from its directory or a checkpoint; the rest of the run is as if uninterrupted."""
    checkpoint_every: int = 0
    """Write a resumable checkpoint every this many environment steps (tokens, at num_envs x
    max_new_tokens per iteration, rounded to whole iterations) and after the last (0: none). Each
    holds the trainable weights and Adam's state: ~12 bytes per trainable parameter."""
    save_model: bool = True
    """Write the trained policy and value head (safetensors) at the end."""
    progress: bool = True
    """Show a progress bar (iterations, tokens/s, score, KL) when stderr is a terminal."""


@config_group
class RLHFComputeOptions:
    """Where and in which precision the models compute."""

    device: str = "auto"
    """Torch device: auto (cuda when present), cpu or cuda[:i]."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Compute dtype. bfloat16/float16 is mixed precision: the models' matmuls run in it under
    torch.autocast while the trained weights, Adam and the loss stay float32 (a pure-bf16 Adam
    step rounds most small updates away). The frozen reward model is loaded in this dtype."""
    gradient_checkpointing: bool = False
    """Recompute the policy's decoder layers in the backward pass instead of keeping their
    activations (transformers' gradient checkpointing): less peak memory for about a third more
    update compute. Needs a policy without dropout (the training forward must equal acting's)."""
    torch_threads: int = 2
    """Torch intra-op threads (no env workers compete with an LLM run)."""
    kernels: Literal["auto", "plain", "fast"] = "auto"
    """Kernels: plain (the loss formula with autograd, torch's Adam) or fast (fused loss node and
    direct fused-Adam step; the same numbers within rounding); auto is plain here."""


@flat_init
@dataclass(frozen=True)
class RLHFConfig(ComposedConfig):
    """PPO on the token-level LLM environment: the same PPO core, one token per step."""

    KEY_HPARAMS: ClassVar[tuple[str, ...]] = ("policy", "reward_model", "reward", "seed", "iterations", "learning_rate",
                                              "num_envs", "max_new_tokens", "kl_coef")

    policy: str = ""
    """Causal LM (hub name in the local cache, or a local path); the frozen reference is its initial weights."""
    reward_model: str | None = None
    """Sequence-classification reward model (1 label), hub name or path; or pass reward= to train_rlhf()."""
    prompts: str = ""
    """Prompt data: a .txt file (one prompt per line), a .jsonl file with a "prompt" field and any
    other columns (passed to reward functions), or a datasets folder written by save_to_disk."""
    seed: int = 1
    """Seed for torch, numpy and prompt sampling."""
    iterations: int = 20
    """PPO iterations (one batch of responses and one update each)."""
    model: ModelOptions = field(default_factory=ModelOptions)
    rewards: RewardOptions = field(default_factory=RewardOptions)
    prompt_format: PromptOptions = field(default_factory=PromptOptions)
    responses: ResponseOptions = field(default_factory=ResponseOptions)
    kl: KLOptions = field(default_factory=KLOptions)
    run: RLHFRunOptions = field(default_factory=RLHFRunOptions)
    compute: RLHFComputeOptions = field(default_factory=RLHFComputeOptions)
    ppo: PPOConfig = field(default_factory=rlhf_ppo_defaults)
    """PPO update hyperparameters (advantages are whitened over valid tokens only)."""
    variants: RLHFVariantGroups = field(default_factory=RLHFVariantGroups)
    """Research variants, one options group each: Outer-PPO, HP3O (whole responses) and the
    critic-free RLOO / GRPO group advantages."""

    @property
    def checkpoint_every_updates(self) -> int:
        """Iterations between checkpoints (0: none), as the Gymnasium trainer counts them."""
        return checkpoint_cadence(self.checkpoint_every, self.num_envs * self.max_new_tokens)

    def validate_own(self) -> None:
        for name in ("num_envs", "max_new_tokens", "iterations", "kl_horizon", "torch_threads"):
            require_positive_int(self, name)
        require_resume_path(self)
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise ConfigError(f"temperature must be > 0, got {self.temperature!r}")
        if not (math.isfinite(self.kl_coef) and self.kl_coef >= 0):
            raise ConfigError(f"kl_coef must be >= 0, got {self.kl_coef!r}")
        if not isinstance(self.checkpoint_every, int) or self.checkpoint_every < 0:
            raise ConfigError(f"checkpoint_every must be >= 0, got {self.checkpoint_every!r}")
        if not isinstance(self.lora_r, int) or self.lora_r < 0:
            raise ConfigError(f"lora_r must be >= 0, got {self.lora_r!r}")
        if self.num_envs % self.num_minibatches:
            raise ConfigError(f"num_minibatches={self.num_minibatches} does not divide num_envs={self.num_envs} "
                              "(minibatches are whole sequences)")
        if not self.resume:  # refused for a new run; a stored run resumes as it was set (one token: advantage 0)
            require_minibatches(self.num_envs, self.num_minibatches, self.norm_adv, "num_envs", ONE_RESPONSE)
        if self.kl_target is not None and not (math.isfinite(self.kl_target) and self.kl_target > 0):
            raise ConfigError(f"kl_target must be > 0 or None, got {self.kl_target!r}")
        if self.kl_target is not None and self.kl_coef == 0 and not self.resume:
            raise ConfigError("kl_target adapts beta by factors from kl_coef, which is 0: beta would stay 0; set "
                              "kl_coef > 0 (the starting beta) or drop kl_target")
        sources = int(bool(self.reward_model)) + len(self.reward)
        if self.reward_weights and len(self.reward_weights) != sources:
            raise ConfigError(f"reward_weights has {len(self.reward_weights)} weights for {sources} reward sources "
                              "(the reward model first, when set, then each reward function)")
        self.variants.check(self)


@dataclass(frozen=True)
class RMConfig:
    """Train a reward model on preference pairs (Bradley-Terry)."""

    backbone: str = ""
    """Sequence-classification backbone: hub name in the local cache or a local path (one label is used)."""
    data: str = ""
    """JSONL preference file with prompt, chosen and rejected fields."""
    output: str = "runs/reward_model"
    """Directory for the trained model (safetensors) and tokenizer."""
    epochs: int = 2
    """Passes over the training pairs."""
    batch_size: int = 8
    """Pairs per step."""
    learning_rate: float = 2e-5
    """AdamW learning rate."""
    pooling: Literal["last", "mean"] = "last"
    """Score the last token's hidden state (transformers' convention) or the mean over tokens;
    saved in the model's config (``rlkit_pooling``) so scorers use the same."""
    train_backbone: bool = True
    """Fine-tune the whole model; off trains only the score head on frozen last-token features
    (a linear Bradley-Terry probe: far cheaper on a CPU)."""
    eval_fraction: float = 0.2
    """Share of pairs held out for pairwise accuracy."""
    max_length: int = 256
    """Truncate prompt + response to this many tokens."""
    seed: int = 1
    """Seed for the split, the order and the head's initialization."""
    device: str = "auto"
    """Torch device: auto, cpu or cuda[:i]."""
    dtype: Literal["float32", "bfloat16"] = "float32"
    """Model dtype."""
    torch_threads: int = 2
    """Torch intra-op threads."""
    progress: bool = True
    """Show a progress bar (batches, loss) when stderr is a terminal."""

    def __post_init__(self) -> None:
        require_seed(self.seed)
        check_device(self.device)
        for name in ("epochs", "batch_size", "max_length", "torch_threads"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if not 0 < self.eval_fraction < 1:
            raise ConfigError(f"eval_fraction must lie in (0, 1), got {self.eval_fraction}")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ConfigError(f"learning_rate must be > 0, got {self.learning_rate}")
