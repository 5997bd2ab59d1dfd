"""Building the pieces of an RLHF run from its config: prompts, the policy and its frozen
reference (or LoRA adapters over one shared copy), the tokenizer and the reward."""

from __future__ import annotations

import contextlib
import copy
import warnings
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import torch

from rlkit.errors import ConfigError, one_line
from rlkit.rlhf.config import RLHFConfig
from rlkit.rlhf.models import check_same_vocabulary, load_model, load_tokenizer
from rlkit.rlhf.prompts import read_prompt_data
from rlkit.rlhf.reward_model import RewardModelScorer
from rlkit.rlhf.rewards import RewardFunction, RewardSet, load_reward_function
from rlkit.rlhf.score_norm import NORMALIZATION_FILE, ScoreNormalization


def read_prompts(path: str) -> list[str]:
    """The prompts of a .txt or .jsonl file or a datasets folder (:func:`read_prompt_data`), as
    written (a conversation stays a list of messages)."""
    return read_prompt_data(path).prompts


class PolicyParts(NamedTuple):
    policy: torch.nn.Module
    """The trained causal LM (float32 master weights)."""
    reference: torch.nn.Module | None
    """A frozen copy of its initial weights (None under LoRA: the base with adapters off)."""
    peft: Any
    """The peft wrapper under LoRA (None otherwise)."""


def load_policy(cfg: RLHFConfig, policy: torch.nn.Module | None, device: torch.device) -> torch.nn.Module:
    """The policy in float32 (mixed precision keeps master weights in float32: the reference is
    copied from them, so the KL is exactly 0 at the start in every dtype; in bf16 the weights
    themselves would round most small updates away)."""
    if policy is None:
        policy = load_model(cfg.policy, "causal-lm", torch.float32, str(device))
    return policy.float()


def wrap_policy(cfg: RLHFConfig, policy: torch.nn.Module, device: torch.device) -> PolicyParts:
    """The trained module and the reference: a frozen copy, or LoRA adapters over one copy. A run
    without a KL penalty (``kl_coef`` 0, no ``kl_target``) loads no reference."""
    if not cfg.lora_r:
        reference = copy.deepcopy(policy).to(device).eval().requires_grad_(False) if uses_reference(cfg) else None
        policy.requires_grad_(True)
        return PolicyParts(policy, reference, None)
    # LoRA (peft): only the adapters train; the reference is the same weights with the adapters
    # disabled, so there is one copy of the model.
    from peft import LoraConfig, get_peft_model

    try:
        with warnings.catch_warnings():  # peft reads transformers' deprecated is_gradient_checkpointing
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.* is deprecated",
                                    category=FutureWarning)
            wrapped = get_peft_model(policy, LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=0.0,
                                                        target_modules=list(cfg.lora_targets) or "all-linear"))
    except ValueError as exc:
        raise ConfigError(f"lora_targets {list(cfg.lora_targets)}: {one_line(exc)}") from None
    return PolicyParts(wrapped.get_base_model(), None, wrapped)


def uses_reference(cfg: RLHFConfig) -> bool:
    """Whether the run has a KL penalty against the frozen reference (beta > 0, or an adaptive beta)."""
    return cfg.kl_coef > 0 or cfg.kl_target is not None


def enable_gradient_checkpointing(lm: torch.nn.Module) -> None:
    """Checkpoint ``lm``'s decoder layers (transformers recomputes them in the backward pass of a
    forward run in training mode; see :func:`checkpointed_forward`). One-line :class:`ConfigError`
    for a model that does not support it or has dropout (training mode would then change the
    function, and the update's log-probs would no longer be the rollout's)."""
    dropout = sorted(k for k, v in lm.config.to_dict().items()
                     if "dropout" in k and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0)
    dropout += ["a Dropout module"] if any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in lm.modules()) else []
    if dropout:
        raise ConfigError(f"gradient_checkpointing needs a policy without dropout; this one has {', '.join(dropout)}")
    if not getattr(lm, "supports_gradient_checkpointing", False):
        raise ConfigError(f"gradient_checkpointing: {type(lm).__name__} does not support it")
    if hasattr(lm, "activation_checkpointing_enable"):  # its name where transformers deprecates the old one
        lm.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


@contextlib.contextmanager
def checkpointed_forward(lm: torch.nn.Module, enabled: bool) -> Iterator[None]:
    """Training mode for the update's forward pass when checkpointing (transformers checkpoints
    only in training mode; without dropout it computes the same function), eval mode after."""
    if not enabled:
        yield
        return
    lm.train()
    try:
        yield
    finally:
        lm.eval()


def build_tokenizer(cfg: RLHFConfig, tokenizer: Any) -> Any:
    return tokenizer if tokenizer is not None else load_tokenizer(cfg.policy)


def build_reward(cfg: RLHFConfig, reward: Any, tokenizer: Any, device: torch.device) -> Any:
    """The run's reward: ``reward`` as given (a callable ``(prompts, responses) -> scores``, a
    :class:`RewardSet`, or a list of reward functions), or from the config: the reward model and
    the reward functions (a :class:`RewardSet` when there are functions; the reward model's scorer
    alone otherwise)."""
    if reward is not None:
        if cfg.reward:
            raise ConfigError("reward functions come from the config (reward) or from reward=, not both")
        if isinstance(reward, (list, tuple)):
            return RewardSet([RewardFunction(getattr(f, "__name__", f"reward{i}"), f) for i, f in enumerate(reward)])
        return reward
    if not cfg.reward_model and not cfg.reward:
        raise ConfigError("no reward: set reward_model or reward (reward functions), or pass reward= "
                          "(a callable (prompts, responses) -> scores)")
    if cfg.reward or cfg.reward_weights:  # a weighted reward model alone is a source set of one
        return make_rewards(cfg, tokenizer, device)
    return _reward_model(cfg, tokenizer, device)


def make_rewards(cfg: RLHFConfig, tokenizer: Any, device: torch.device) -> RewardSet:
    """The config's reward sources as one :class:`RewardSet`: the reward model (when set) first,
    then each reward function, weighted by ``reward_weights`` (default: all 1)."""
    scorer = _reward_model(cfg, tokenizer, device) if cfg.reward_model else None
    weights = list(cfg.reward_weights) or [1.0] * (int(scorer is not None) + len(cfg.reward))
    model_weight = weights.pop(0) if scorer is not None else 1.0
    return RewardSet([load_reward_function(spec, w) for spec, w in zip(cfg.reward, weights)], scorer, model_weight)


def _reward_model(cfg: RLHFConfig, tokenizer: Any, device: torch.device) -> RewardModelScorer:
    """A :class:`RewardModelScorer` over ``cfg.reward_model`` with the score normalization saved
    beside it (when there is one)."""
    norm_file = Path(cfg.reward_model) / NORMALIZATION_FILE
    model = load_model(cfg.reward_model, "reward-model", getattr(torch, cfg.dtype), str(device))
    check_same_vocabulary(model, cfg.reward_model, tokenizer)
    return RewardModelScorer(model, tokenizer,
                             normalization=ScoreNormalization.load(norm_file) if norm_file.is_file() else None)
