"""``rlkit rlhf eval``: a trained run's policy (or any causal LM, e.g. the initial model) answers
held-out prompts, greedily or with ``k`` samples each, and the run's reward sources score the
answers.

Each prompt's score is the mean over its ``k`` completions; a source's mean and its 95% interval
are over prompts (a percentile bootstrap of the prompts, 20,000 resamples, seeded). ``accuracy``
is the mean of the first reward function (a correctness function returning 1 or 0 makes it the
share of correct answers); a completion it returns None for counts as 0 there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlkit.core.device import torch_device
from rlkit.core.token_grid import left_pad
from rlkit.errors import ConfigError
from rlkit.io.checkpoint import load_file
from rlkit.io.files import read_json
from rlkit.io.lock import holder
from rlkit.io.signals import raise_if_stopped
from rlkit.io.threads import seed_and_threads
from rlkit.rlhf.build import build_tokenizer, load_policy, make_rewards, wrap_policy
from rlkit.rlhf.config import RLHFConfig
from rlkit.rlhf.policy import LMActorCritic
from rlkit.rlhf.prompts import prompt_texts, read_prompt_data
from rlkit.rlhf.rewards import RewardSet

RESAMPLES = 20_000


@dataclass(frozen=True)
class EvalRequest:
    """What ``rlkit rlhf eval`` was asked (its flags)."""

    target: str
    """A run folder of ``rlkit rlhf`` (its saved policy) or a causal LM folder."""
    prompts: str
    reward: tuple[str, ...] = ()
    reward_model: str | None = None
    reward_weights: tuple[float, ...] = ()
    samples: int = 1
    """Completions per prompt; with more than one they are sampled."""
    temperature: float = 1.0
    max_new_tokens: int | None = None
    """Default: the run's own, else 32."""
    chat_template: bool | None = None
    """Default: the run's own, else off."""
    system_prompt: str | None = None
    batch_size: int = 16
    seed: int = 1
    device: str = "auto"


def run_config(request: EvalRequest) -> tuple[RLHFConfig, Path | None]:
    """The config the policy and its prompts are built with: the run's own (its ``config.json``)
    with the request's settings, or a fresh one over a model folder; and the run's saved policy."""
    folder = Path(request.target)
    saved = read_json(folder / "config.json") if folder.is_dir() else None
    if isinstance(saved, dict) and "total_steps" in saved and "env" in saved:
        raise ConfigError(f"{folder} is a Gymnasium run; evaluate it with: rlkit eval {folder}")
    if isinstance(saved, dict) and saved.get("policy"):
        if (pid := holder(folder)) is not None:
            raise ConfigError(f"{folder} is being trained by another rlkit process ({pid}); evaluate it once that "
                              "run has finished")
        weights = folder / "policy.safetensors"
        if not weights.is_file():
            raise ConfigError(f"{folder} is an RLHF run without a saved policy (policy.safetensors: it ran with "
                              "--no-save-model or has not finished)")
        cfg = RLHFConfig.from_dict({**saved, "resume": None})
    elif saved is not None:
        cfg, weights = RLHFConfig(policy=str(folder)), None
    else:
        raise ConfigError(f"{request.target!r} is neither an rlkit rlhf run folder nor a model folder (no readable "
                          "config.json)")
    changes: dict[str, Any] = {"prompts": request.prompts, "device": request.device, "seed": request.seed,
                               "temperature": request.temperature, "kl_coef": 0.0, "kl_target": None,
                               "reward": request.reward, "reward_model": request.reward_model,
                               "reward_weights": request.reward_weights}
    if request.max_new_tokens is not None:
        changes["max_new_tokens"] = request.max_new_tokens
    if request.chat_template is not None:
        changes["chat_template"] = request.chat_template
        if not request.chat_template:  # the run's system message goes with its template
            changes["system_prompt"] = None
    if request.system_prompt is not None:
        changes["system_prompt"] = request.system_prompt
    return cfg.replace(**changes), weights


def evaluate(request: EvalRequest) -> dict[str, Any]:
    """Generate, score and summarize (see the module docstring): the JSON ``rlkit rlhf eval`` prints,
    with ``completions`` (per prompt: the prompt and its ``k`` answers) that it writes to ``--out``."""
    if request.samples < 1 or request.batch_size < 1:
        raise ConfigError(f"--samples and --batch-size must be >= 1, got {request.samples}, {request.batch_size}")
    if not request.reward and not request.reward_model:
        raise ConfigError("no reward: give --reward (reward functions) and/or --reward-model")
    cfg, weights = run_config(request)
    seed_and_threads(cfg.seed, cfg.torch_threads)
    device = torch_device(cfg.device)
    tokenizer = build_tokenizer(cfg, None)
    model = _policy(cfg, weights, device)
    data = read_prompt_data(cfg.prompts)
    texts = prompt_texts(data, tokenizer, cfg.chat_template, cfg.system_prompt)
    rewards = make_rewards(cfg, tokenizer, device)
    generator = torch.Generator(device).manual_seed(cfg.seed)
    k, per_prompt = request.samples, {}
    rows = [i for i in range(len(texts)) for _ in range(k)]
    completions: list[str] = []
    for start in range(0, len(rows), request.batch_size):
        raise_if_stopped()
        batch = rows[start:start + request.batch_size]
        prompt_ids = [tokenizer(texts[i], add_special_tokens=False).input_ids for i in batch]
        responses = _generate(model, prompt_ids, cfg.max_new_tokens, tokenizer.eos_token_id, generator, k == 1, device)
        answers = [tokenizer.decode(r, skip_special_tokens=True) for r in responses]
        completions += answers
        scored = rewards.score([data.prompts[i] for i in batch], answers, data.rows(batch),
                               [p + r for p, r in zip(prompt_ids, responses)])
        for name, values in {"total": scored.total, **scored.per_source}.items():
            per_prompt.setdefault(name, []).append(values)
    answers_of = [{"prompt": data.prompts[i], "answers": completions[i * k:(i + 1) * k]} for i in range(len(texts))]
    raise_if_stopped()
    return _summary(request, cfg, rewards, {n: np.concatenate(v).reshape(-1, k) for n, v in per_prompt.items()},
                    answers_of)


def _policy(cfg: RLHFConfig, weights: Path | None, device: torch.device) -> LMActorCritic:
    """The causal LM as the run trained it (LoRA adapters, value head) with its saved weights."""
    policy, _, _ = wrap_policy(cfg, load_policy(cfg, None, device), device)
    model = LMActorCritic(policy.eval(), cfg.temperature, cfg.separate_critic, critic=cfg.variants.critic).to(device)
    if weights is not None:
        state = {k.removeprefix("model."): v for k, v in load_file(str(weights)).items()}
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise ConfigError(f"{weights} does not fit the run's model ({len(missing)} missing, {len(unexpected)} "
                              "unexpected weights)")
    return model.eval()


@torch.no_grad()
def _generate(model: LMActorCritic, prompts: list[list[int]], steps: int, eos: int, generator: torch.Generator,
              greedy: bool, device: torch.device) -> list[list[int]]:
    """Each prompt's response token ids (up to and including EOS, at most ``steps``)."""
    ids, mask, width = left_pad(prompts, steps, device)
    state, logits = model.start(ids[:, :width], mask[:, :width])
    out: list[list[int]] = [[] for _ in prompts]
    active = torch.ones(len(prompts), dtype=torch.bool, device=device)
    for t in range(steps):
        tokens = logits.argmax(-1) if greedy else model.head.sample(logits, generator)
        for i in torch.nonzero(active).flatten().tolist():
            out[i].append(int(tokens[i]))
        active &= tokens != eos
        if t + 1 == steps or not active.any():
            break
        logits = model.advance(state, tokens)
    return out


def bootstrap_interval(values: np.ndarray, seed: int, resamples: int = RESAMPLES) -> tuple[float, float]:
    """The 95% percentile-bootstrap interval of the mean of ``values [P]`` (resampling its entries)."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (resamples, len(values)))].mean(1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def _summary(request: EvalRequest, cfg: RLHFConfig, rewards: RewardSet, scores: dict[str, np.ndarray],
             completions: list[dict[str, Any]]) -> dict[str, Any]:
    """Per source: the mean over prompts of each prompt's mean, its interval, the share it applied to."""
    sources: dict[str, Any] = {}
    for name, values in scores.items():
        applied = ~np.isnan(values)
        per_prompt = np.nan_to_num(values, nan=0.0).mean(1)
        low, high = bootstrap_interval(per_prompt, cfg.seed)
        sources[name] = {"mean": float(per_prompt.mean()), "low": low, "high": high,
                         "applied": float(applied.mean())}
    first = rewards.functions[0].log_name if rewards.functions else None
    return {"target": request.target, "prompts": len(scores["total"]), "samples": request.samples,
            "greedy": request.samples == 1, "max_new_tokens": cfg.max_new_tokens,
            "accuracy": sources[first] if first else None, "rewards": sources,
            "completions": completions}
