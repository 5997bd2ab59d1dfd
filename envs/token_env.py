"""A token-level LLM environment: one prompt per episode, one token per step.

Observation: ``{"input_ids": [L], "attention_mask": [L]}`` (prompt + response so far, right
padded to the context length L; the mask comes from lengths, never from ``ids != pad_id``, so
tokenizers whose pad token is EOS, like SmolLM2's, are handled). Action: a token id
(``Discrete(vocab)``). The episode ends at EOS (terminated) or after ``max_new_tokens``
(truncated). The reward is 0 until the last step, which gets the score of (prompt, response)
plus an optional penalty when the response has no EOS.

The per-token KL penalty against a reference model is the trainer's: it scores whole batches
of responses with the reference in one pass.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import gymnasium as gym
import numpy as np

from rlkit.errors import LLMEnvError

RewardFn = Callable[[list[str], list[str]], Sequence[float]]
"""Scores of (prompt, response) texts."""


class TokenScorer(Protocol):
    """Scores token sequences directly (e.g. :class:`rlkit.rlhf.reward_model.RewardModelScorer`),
    so the env need not decode and re-tokenize."""

    def score_ids(self, sequences: Sequence[Sequence[int]]) -> np.ndarray: ...


class TokenEnv(gym.Env):
    """One sub-environment of the token-level LLM environment (see the module docstring)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, prompts: Sequence[str] | Sequence[Sequence[int]], reward: RewardFn | TokenScorer,
                 vocab_size: int, eos_token_id: int, max_new_tokens: int = 32, max_length: int | None = None,
                 tokenizer: Any = None, missing_eos_penalty: float | None = None,
                 pad_token_id: int = 0,
                 model_context: int | None = None) -> None:
        if len(prompts) == 0:
            raise LLMEnvError("empty prompt dataset")
        if max_new_tokens <= 0:
            raise LLMEnvError(f"max_new_tokens must be > 0, got {max_new_tokens}")
        if isinstance(prompts[0], str):
            if tokenizer is None:
                raise LLMEnvError("text prompts need a tokenizer")
            prompts = [tokenizer(p, add_special_tokens=False).input_ids for p in prompts]  # type: ignore[union-attr]
        self.prompts = [list(map(int, p)) for p in prompts]
        if any(len(p) == 0 for p in self.prompts):
            raise LLMEnvError(f"prompt {next(i for i, p in enumerate(self.prompts) if not p)} is empty")
        context = max_length or max(len(p) for p in self.prompts) + max_new_tokens
        context = min(context, model_context or context)  # the models' context bounds prompt + response
        for i, p in enumerate(self.prompts):
            if len(p) + max_new_tokens > context:
                raise LLMEnvError(f"prompt {i} has {len(p)} tokens; with max_new_tokens={max_new_tokens} it exceeds "
                                  f"the context of {context} tokens")
        self.reward, self.tokenizer = reward, tokenizer
        self.vocab_size, self.eos, self.pad = vocab_size, eos_token_id, pad_token_id
        self.max_new_tokens, self.length = max_new_tokens, context
        self.missing_eos_penalty = missing_eos_penalty
        box = gym.spaces.Box(0, vocab_size - 1, (context,), np.int64)
        self.observation_space = gym.spaces.Dict({"input_ids": box,
                                                  "attention_mask": gym.spaces.Box(0, 1, (context,), np.int64)})
        self.action_space = gym.spaces.Discrete(vocab_size)
        self.ids = np.full(context, pad_token_id, np.int64)
        self.n, self.prompt_len = 0, 0

    def _obs(self) -> dict[str, np.ndarray]:
        mask = np.zeros(self.length, np.int64)
        mask[: self.n] = 1
        return {"input_ids": self.ids.copy(), "attention_mask": mask}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        index = int(self.np_random.integers(len(self.prompts))) if not (options and "prompt" in options) \
            else int(options["prompt"])
        prompt = self.prompts[index]
        self.ids[:] = self.pad
        self.ids[: len(prompt)] = prompt
        self.n = self.prompt_len = len(prompt)
        self.prompt_index = index
        return self._obs(), {"prompt_index": index}

    def step(self, action: int):
        if self.n == 0:
            raise gym.error.ResetNeeded("call reset() before step()")
        token = int(action)
        if not 0 <= token < self.vocab_size:
            raise LLMEnvError(f"token id {token} is outside the vocabulary [0, {self.vocab_size})")
        self.ids[self.n] = token
        self.n += 1
        info: dict[str, Any] = {}
        terminated = token == self.eos
        truncated = not terminated and self.n - self.prompt_len >= self.max_new_tokens
        reward = 0.0
        if terminated or truncated:
            score = self._score()
            reward = score + (self.missing_eos_penalty if truncated and self.missing_eos_penalty else 0.0)
            info.update(score=score, eos=terminated, response_length=self.n - self.prompt_len)
        return self._obs(), float(reward), terminated, truncated, info

    def _score(self) -> float:
        prompt, response = self.ids[: self.prompt_len].tolist(), self.ids[self.prompt_len: self.n].tolist()
        score_ids = getattr(self.reward, "score_ids", None)
        if score_ids is not None:
            return float(score_ids([prompt + response])[0])
        if self.tokenizer is not None:
            texts = ([self.tokenizer.decode(prompt)], [self.tokenizer.decode(response)])
        else:
            texts = ([" ".join(map(str, prompt))], [" ".join(map(str, response))])
        return float(self.reward(*texts)[0])


def register_token_envs() -> None:
    """Register ``rlkit/TokenLM-v0`` with Gymnasium (kwargs as :class:`TokenEnv`'s)."""
    if "rlkit/TokenLM-v0" not in gym.registry:
        gym.register("rlkit/TokenLM-v0", entry_point="rlkit_envs.token_env:TokenEnv", disable_env_checker=True)
