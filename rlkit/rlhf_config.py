"""Frozen configuration of RLHF runs on the token-level LLM environment (issue #4)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from rlkit.variants import ConfigError, VariantOptions


@dataclass(frozen=True)
class RLHFConfig(VariantOptions):
    """PPO on the token-level LLM environment: the same PPO core, one token per step."""

    policy: str = ""
    """Causal LM (hub name in the local cache, or a local path); the frozen reference is its initial weights."""
    reward_model: str | None = None
    """Sequence-classification reward model (1 label), hub name or path; or pass reward= to train_rlhf()."""
    prompts: str = ""
    """Prompt file: .txt (one prompt per line) or .jsonl with a "prompt" field."""
    seed: int = 1
    """Seed for torch, numpy and prompt sampling."""
    num_envs: int = 8
    """Sub-environments, i.e. responses generated per iteration."""
    max_new_tokens: int = 32
    """Response length limit (the episode is truncated there)."""
    separate_critic: bool = False
    """Value head on a separate critic trunk (a copy of the policy's) instead of the shared trunk."""
    lora_r: int = 0
    """LoRA rank (peft); 0 trains all weights. With LoRA the reference is the base model with adapters off."""
    lora_alpha: float = 16.0
    """LoRA scaling alpha."""
    lora_targets: tuple[str, ...] = ()
    """Module names to adapt (default: every linear layer but the output head)."""
    temperature: float = 1.0
    """Sampling temperature, applied identically when acting and recomputing log-probs."""
    iterations: int = 20
    """PPO iterations (one batch of responses and one update each)."""
    update_epochs: int = 4
    """Epochs over each batch of responses."""
    num_minibatches: int = 2
    """Minibatches per epoch, by whole sequence; must divide num_envs."""
    learning_rate: float = 1e-5
    """Adam learning rate (eps 1e-5)."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over the iterations."""
    gamma: float = 1.0
    """Discount over tokens."""
    gae_lambda: float = 0.95
    """GAE lambda over tokens."""
    norm_adv: bool = True
    """Whiten advantages per minibatch (over valid tokens only)."""
    clip_coef: float = 0.2
    """Surrogate (and value) clipping coefficient."""
    clip_vloss: bool = True
    """Clip the value loss around the rollout's values."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    vf_coef: float = 0.1
    """Value loss coefficient."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip."""
    target_kl: float | None = None
    """Early-stop the epochs once approx_kl exceeds this."""
    kl_coef: float = 0.05
    """beta: per-token KL penalty coefficient against the frozen reference."""
    kl_estimator: Literal["k1", "k3"] = "k1"
    """KL estimator: k1 = log pi - log ref, k3 = (r - 1) - log r with r = ref / pi."""
    kl_target: float | None = None
    """Adaptive beta (Ziegler et al. 2019): target KL per response; None keeps beta fixed."""
    kl_horizon: int = 10_000
    """Adaptive beta horizon in responses."""
    missing_eos_penalty: float | None = None
    """Added to the score of a response that ends without EOS (e.g. -1.0)."""
    device: str = "auto"
    """Torch device: auto (cuda when present), cpu or cuda[:i]."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Compute dtype. bfloat16/float16 is mixed precision: the models' matmuls run in it under
    ``torch.autocast`` while the trained weights, Adam and the loss stay float32 (a pure-bf16 Adam
    step rounds most small updates away). The frozen reward model is loaded in this dtype."""
    torch_threads: int = 2
    """Torch intra-op threads (no env workers compete with an LLM run)."""
    logdir: str = "runs"
    """Directory under which each run gets its own folder."""
    run_name: str | None = None
    """Run folder name (default: rlhf__{variant}__s{seed}__{timestamp})."""
    save_model: bool = True
    """Write the trained policy and value head (safetensors) at the end."""
    checkpoint_every: int = 0
    """Write a resumable checkpoint every N iterations and after the last (0: none). Each holds the
    trainable weights and Adam's state: ~12 bytes per trainable parameter (LoRA keeps it small)."""
    resume: str | None = None
    """Continue a run from its directory or a checkpoint; the rest of the run is as if uninterrupted."""

    def __post_init__(self) -> None:
        from rlkit.config import _VALIDATE

        if _VALIDATE.get():
            self.validate()

    def validate(self) -> None:
        """Raise :class:`ConfigError` (one line) on a malformed value."""
        for name in ("num_envs", "max_new_tokens", "iterations", "update_epochs", "num_minibatches", "kl_horizon",
                     "torch_threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in ("temperature", "learning_rate", "clip_coef", "max_grad_norm"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be > 0, got {value!r}")
        for name in ("ent_coef", "vf_coef", "kl_coef"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not isinstance(self.checkpoint_every, int) or self.checkpoint_every < 0:
            raise ConfigError(f"checkpoint_every must be >= 0, got {self.checkpoint_every!r}")
        if not isinstance(self.lora_r, int) or self.lora_r < 0:
            raise ConfigError(f"lora_r must be >= 0, got {self.lora_r!r}")
        if not 0 <= self.gamma <= 1 or not 0 <= self.gae_lambda <= 1:
            raise ConfigError(f"gamma and gae_lambda must lie in [0, 1], got {self.gamma}, {self.gae_lambda}")
        if self.num_envs % self.num_minibatches:
            raise ConfigError(f"num_minibatches={self.num_minibatches} does not divide num_envs={self.num_envs} "
                              "(minibatches are whole sequences)")
        if self.kl_target is not None and not (math.isfinite(self.kl_target) and self.kl_target > 0):
            raise ConfigError(f"kl_target must be > 0 or None, got {self.kl_target!r}")
        if self.hp3o and self.hp3o_trajectories % self.num_minibatches:
            raise ConfigError(f"num_minibatches={self.num_minibatches} does not divide hp3o_trajectories="
                              f"{self.hp3o_trajectories} (HP3O batches are whole sequences here)")
        self.validate_variants()

    def replace(self, **overrides: object) -> "RLHFConfig":
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **overrides)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> "RLHFConfig":
        """Inverse of :meth:`to_dict` (JSON lists back to tuples); unknown fields are an error."""
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"unknown config field(s): {', '.join(sorted(unknown))}")
        return cls(**{**data, "lora_targets": tuple(data.get("lora_targets") or ())})  # type: ignore[arg-type]
