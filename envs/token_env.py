"""A token-level LLM environment (issue #4): one prompt per episode, one token per step.

Observation: ``{"input_ids": [L], "attention_mask": [L]}`` (prompt + response so far, right
padded to the context length L; the mask comes from lengths, never from ``ids != pad_id``, so
tokenizers whose pad token is EOS, like SmolLM2's, are handled). Action: a token id
(``Discrete(vocab)``). The episode ends at EOS (terminated) or after ``max_new_tokens``
(truncated). The reward is 0 until the last step, which gets the score of (prompt, response)
plus an optional penalty when the response has no EOS.

With a frozen ``reference`` causal LM the env reports ``info["ref_log_prob"]``, the reference's
log-probability of each appended token (same temperature as the policy), computed with one KV
cache per sub-env (O(T) per response). The per-token KL penalty is applied by the trainer,
which holds the policy's log-probs.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
import torch

from envs.score_norm import ScoreNormalization

RewardFn = Callable[[list[str], list[str]], Sequence[float]]


class LLMEnvError(ValueError):
    """Bad LLM-environment input (one line): empty dataset, over-long prompt, unknown model, ..."""


def load_model(name_or_path: str, kind: str = "causal-lm", dtype: torch.dtype = torch.float32,
               device: str = "cpu") -> torch.nn.Module:
    """A frozen ``transformers`` model from a hub name (cached) or a local path; one-line error otherwise."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    cls = AutoModelForCausalLM if kind == "causal-lm" else AutoModelForSequenceClassification
    kwargs: dict[str, Any] = {"dtype": dtype} if kind == "causal-lm" else {"dtype": dtype, "num_labels": 1}
    try:
        model = cls.from_pretrained(name_or_path, **kwargs)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LLMEnvError(f"cannot load model {name_or_path!r}: {first}") from None
    return model.to(device).eval().requires_grad_(False)


class RewardModelScorer:
    """Scores with an ``AutoModelForSequenceClassification`` (one label) at the last valid token.

    The score head is applied to the final hidden states and read at index ``length - 1`` of
    each right-padded sequence, so an EOS that equals the pad token is still scored. With a
    ``normalization`` (see :mod:`envs.score_norm`, set by :meth:`calibrate`) the raw score is
    mapped to the initial policy's scale (mean 0, std 1) before it becomes the reward.
    """

    def __init__(self, model: torch.nn.Module, tokenizer: Any = None, batch_size: int = 16,
                 normalization: ScoreNormalization | None = None) -> None:
        if getattr(model, "score", None) is None:
            raise LLMEnvError(f"{type(model).__name__} has no 'score' head; use a decoder-style sequence classifier")
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.normalization = normalization
        self._prefetched: dict[tuple[int, ...], float] = {}

    @torch.no_grad()
    def raw_scores(self, sequences: list[list[int]]) -> np.ndarray:
        """``[B]`` the reward model's own scores of whole sequences (no normalization)."""
        from rlkit.reward_model import last_token_scores

        out = [last_token_scores(self.model, sequences[i:i + self.batch_size]).cpu()
               for i in range(0, len(sequences), self.batch_size)]
        return torch.cat(out).numpy()

    def _score(self, sequences: list[list[int]]) -> np.ndarray:
        raw = self.raw_scores(sequences)
        return raw if self.normalization is None else self.normalization.apply(sequences, raw)

    def calibrate(self, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]],
                  per_prompt: bool = True) -> ScoreNormalization:
        """Fit and keep the normalization from the initial policy's ``responses`` to ``prompts``
        (token ids, one response per entry; repeat a prompt for several responses)."""
        raw = self.raw_scores([list(map(int, p)) + list(map(int, r)) for p, r in zip(prompts, responses)])
        self.normalization = ScoreNormalization.fit(prompts, raw, per_prompt)
        return self.normalization

    def prefetch(self, sequences: Sequence[Sequence[int]]) -> None:
        """Score sequences that are about to finish in one batch; ``score_ids`` then finds them.
        (A vector of sub-envs each scoring its own response would otherwise run batches of one.)"""
        seqs = [list(map(int, s)) for s in sequences]
        if seqs:
            self._prefetched.update(zip(map(tuple, seqs), self._score(seqs).tolist()))

    def score_ids(self, sequences: Sequence[Sequence[int]]) -> np.ndarray:
        """``[B]`` scores of whole token sequences (prompt + response)."""
        seqs = [list(map(int, s)) for s in sequences]
        missing = [s for s in seqs if tuple(s) not in self._prefetched]
        if missing:
            self.prefetch(missing)
        out = np.array([self._prefetched[tuple(s)] for s in seqs], dtype=np.float32)
        for s in seqs:  # a sequence may appear twice in one call
            self._prefetched.pop(tuple(s), None)
        return out

    def __call__(self, prompts: list[str], responses: list[str]) -> list[float]:
        if self.tokenizer is None:
            raise LLMEnvError("RewardModelScorer needs a tokenizer to score text")
        seqs = [self.tokenizer(p + r, add_special_tokens=False).input_ids for p, r in zip(prompts, responses)]
        return self.score_ids(seqs).tolist()


class TokenEnv(gym.Env):
    """One sub-environment of the token-level LLM environment (see the module docstring)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, prompts: Sequence[str] | Sequence[Sequence[int]], reward: RewardFn | RewardModelScorer,
                 vocab_size: int, eos_token_id: int, max_new_tokens: int = 32, max_length: int | None = None,
                 tokenizer: Any = None, missing_eos_penalty: float | None = None,
                 reference: torch.nn.Module | None = None, temperature: float = 1.0, pad_token_id: int = 0,
                 model_context: int | None = None) -> None:
        if len(prompts) == 0:
            raise LLMEnvError("empty prompt dataset")
        if max_new_tokens <= 0 or temperature <= 0:
            raise LLMEnvError(f"max_new_tokens and temperature must be > 0, got {max_new_tokens}, {temperature}")
        if isinstance(prompts[0], str):
            if tokenizer is None:
                raise LLMEnvError("text prompts need a tokenizer")
            prompts = [tokenizer(p, add_special_tokens=False).input_ids for p in prompts]  # type: ignore[union-attr]
        self.prompts = [list(map(int, p)) for p in prompts]
        if any(len(p) == 0 for p in self.prompts):
            raise LLMEnvError(f"prompt {next(i for i, p in enumerate(self.prompts) if not p)} is empty")
        context = max_length or max(len(p) for p in self.prompts) + max_new_tokens
        limits = [model_context, getattr(getattr(reference, "config", None), "max_position_embeddings", None)]
        context = min([context] + [x for x in limits if x])  # the models' context bounds prompt + response
        for i, p in enumerate(self.prompts):
            if len(p) + max_new_tokens > context:
                raise LLMEnvError(f"prompt {i} has {len(p)} tokens; with max_new_tokens={max_new_tokens} it exceeds "
                                  f"the context of {context} tokens")
        self.reward, self.tokenizer = reward, tokenizer
        self.vocab_size, self.eos, self.pad = vocab_size, eos_token_id, pad_token_id
        self.max_new_tokens, self.length = max_new_tokens, context
        self.missing_eos_penalty, self.reference, self.temperature = missing_eos_penalty, reference, temperature
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

    @torch.no_grad()
    def _reference_step(self, tokens: list[int]) -> None:
        """Feed ``tokens`` to the reference, keeping its KV cache and next-token log-probs."""
        assert self.reference is not None
        device = next(self.reference.parameters()).device
        out = self.reference(input_ids=torch.tensor([tokens], device=device), past_key_values=self._cache,
                             use_cache=True)
        self._cache = out.past_key_values
        self._ref_logp = torch.log_softmax(out.logits[0, -1].float() / self.temperature, dim=-1)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        index = int(self.np_random.integers(len(self.prompts))) if not (options and "prompt" in options) \
            else int(options["prompt"])
        prompt = self.prompts[index]
        self.ids[:] = self.pad
        self.ids[: len(prompt)] = prompt
        self.n = self.prompt_len = len(prompt)
        self.prompt_index = index
        if self.reference is not None:
            self._cache = None
            self._reference_step(prompt)
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
        if self.reference is not None:
            info["ref_log_prob"] = float(self._ref_logp[token])
        terminated = token == self.eos
        truncated = not terminated and self.n - self.prompt_len >= self.max_new_tokens
        reward = 0.0
        if terminated or truncated:
            score = self._score()
            reward = score + (self.missing_eos_penalty if truncated and self.missing_eos_penalty else 0.0)
            info.update(score=score, eos=terminated, response_length=self.n - self.prompt_len)
        elif self.reference is not None:
            self._reference_step([token])
        return self._obs(), float(reward), terminated, truncated, info

    def _score(self) -> float:
        prompt, response = self.ids[: self.prompt_len].tolist(), self.ids[self.prompt_len: self.n].tolist()
        if isinstance(self.reward, RewardModelScorer):
            return float(self.reward.score_ids([prompt + response])[0])
        if self.tokenizer is not None:
            texts = ([self.tokenizer.decode(prompt)], [self.tokenizer.decode(response)])
        else:
            texts = ([" ".join(map(str, prompt))], [" ".join(map(str, response))])
        return float(self.reward(*texts)[0])


def register() -> None:
    """Register ``rlkit/TokenLM-v0`` with Gymnasium (kwargs as :class:`TokenEnv`'s)."""
    if "rlkit/TokenLM-v0" not in gym.registry:
        gym.register("rlkit/TokenLM-v0", entry_point="envs.token_env:TokenEnv", disable_env_checker=True)
