"""Reward models: Bradley-Terry training on preference pairs, and scoring responses with one.

Data: JSONL lines ``{"prompt": ..., "chosen": ..., "rejected": ...}``. The model is any
``AutoModelForSequenceClassification`` with one label; its score is read at the last valid
token (from lengths, so pad == EOS tokenizers are fine). Loss: ``-log sigmoid(r_chosen - r_rejected)``.
Reports pairwise accuracy on a held-out split before and after training.
"""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F

import numpy as np

from rlkit.core.device import torch_device
from rlkit.errors import ConfigError, LLMEnvError, OutputError, one_line
from rlkit.io.files import check_writable, mode_as_created, read_lines, write_json
from rlkit.io.progress import progress_bar
from rlkit.rlhf.config import RMConfig
from rlkit.rlhf.models import load_model, load_tokenizer, quiet_transformers
from rlkit.rlhf.score_norm import ScoreNormalization


@dataclass
class RMResult:
    train_pairs: int
    eval_pairs: int
    eval_accuracy_before: float
    eval_accuracy: float
    steps: int
    output: str

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def read_pairs(path: str) -> list[dict[str, str]]:
    pairs = []
    for i, line in read_lines(path, "preference file"):
        try:
            row = json.loads(line)
            pairs.append({k: str(row[k]) for k in ("prompt", "chosen", "rejected")})
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}:{i}: expected a JSON object with prompt, chosen, rejected ({exc})") from None
    if len(pairs) < 2:
        raise ConfigError(f"preference file {path!r} needs at least 2 pairs, has {len(pairs)}")
    return pairs


def last_token_scores(model: torch.nn.Module, sequences: list[list[int]]) -> torch.Tensor:
    """``[B]`` scores of the model's ``score`` head on each sequence's pooled final hidden state:
    the last token's (``transformers``' convention, the default) or, when the model's config has
    ``rlkit_pooling = "mean"``, the mean over its tokens. Right padding; mask and positions from
    lengths. Differentiable."""
    return model.score(last_token_hidden(model, sequences))[:, 0].float()


def last_token_hidden(model: torch.nn.Module, sequences: list[list[int]]) -> torch.Tensor:
    """``[B, H]`` pooled final hidden state (see :func:`last_token_scores`)."""
    device = next(model.parameters()).device
    lengths = torch.tensor([len(s) for s in sequences], device=device)
    ids = torch.zeros(len(sequences), int(lengths.max()), dtype=torch.long, device=device)
    for i, s in enumerate(sequences):
        ids[i, :len(s)] = torch.as_tensor(s, device=device)
    mask = (torch.arange(ids.shape[1], device=device)[None] < lengths[:, None]).long()
    hidden = model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
    if getattr(model.config, "rlkit_pooling", "last") == "mean":
        return (hidden * mask[..., None]).sum(1) / lengths[:, None]
    return hidden[torch.arange(len(sequences), device=device), lengths - 1]


def _encode(tokenizer: Any, pairs: list[dict[str, str]], max_length: int) -> list[tuple[list[int], list[int]]]:
    def ids(prompt: str, response: str) -> list[int]:
        return tokenizer(prompt + response, add_special_tokens=False).input_ids[:max_length] or [0]
    return [(ids(p["prompt"], p["chosen"]), ids(p["prompt"], p["rejected"])) for p in pairs]


@torch.no_grad()
def pairwise_accuracy(model: torch.nn.Module, encoded: list[tuple[list[int], list[int]]], batch_size: int = 16) -> float:
    wins = 0
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start:start + batch_size]
        scores = last_token_scores(model, [c for c, _ in chunk] + [r for _, r in chunk])
        wins += int((scores[:len(chunk)] > scores[len(chunk):]).sum())
    return wins / len(encoded)


def train_reward_model(cfg: RMConfig, model: torch.nn.Module | None = None, tokenizer: Any = None,
                       pairs: list[dict[str, str]] | None = None) -> RMResult:
    """Train, evaluate held-out pairwise accuracy, save to ``cfg.output`` (a new or empty folder:
    an existing reward model is never replaced)."""
    out = Path(cfg.output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        what = "is a file" if not out.is_dir() else "already holds files"
        raise ConfigError(f"output {cfg.output!r} {what}; choose a new --output (nothing was overwritten)")
    check_writable(next(p for p in [out, *out.absolute().parents] if p.is_dir()))  # before training, not after
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.torch_threads)
    device = torch_device(cfg.device)
    pairs = pairs if pairs is not None else read_pairs(cfg.data)
    if model is None or tokenizer is None:
        model = load_model(cfg.backbone, "backbone", getattr(torch, cfg.dtype), str(device))
        tokenizer = load_tokenizer(cfg.backbone)
    if getattr(model, "score", None) is None:
        raise ConfigError(f"{type(model).__name__} has no 'score' head; use a decoder-style sequence classifier")
    order = list(range(len(pairs)))
    random.Random(cfg.seed).shuffle(order)
    n_eval = max(1, int(round(len(pairs) * cfg.eval_fraction)))
    encoded = _encode(tokenizer, [pairs[i] for i in order], cfg.max_length)
    eval_set, train_set = encoded[:n_eval], encoded[n_eval:]
    if not train_set:
        raise ConfigError("no training pairs left after the held-out split")
    model.config.rlkit_pooling = cfg.pooling
    model = model.to(device).eval()  # no dropout: the scores trained on are the scores served
    before = pairwise_accuracy(model, eval_set)
    steps = _fit(model, train_set, cfg)
    model.eval().requires_grad_(False)
    result = RMResult(len(train_set), len(eval_set), before, pairwise_accuracy(model, eval_set), steps, cfg.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with quiet_transformers():
            model.save_pretrained(out)  # safetensors
            tokenizer.save_pretrained(out)
        mode_as_created(*out.glob("*.safetensors"))
    except Exception as exc:  # a full disk, a folder made read-only meanwhile
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else one_line(exc)
        raise OutputError(f"could not write the reward model to {out}: {reason}") from None
    write_json(out / "rm_result.json", result.to_json())
    return result


def _fit(model: torch.nn.Module, train_set: list[Any], cfg: RMConfig) -> int:
    """``cfg.epochs`` epochs of the Bradley-Terry loss on ``train_set`` (pairs of token id lists,
    chosen first); returns the optimizer steps taken."""
    model.requires_grad_(cfg.train_backbone)
    model.score.requires_grad_(True)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate)
    if not cfg.train_backbone:  # frozen trunk: compute each sequence's last-token feature once
        with torch.no_grad():
            feats = [last_token_hidden(model, [c, r]) for c, r in train_set]
    rng, steps = random.Random(cfg.seed + 1), 0
    order = list(range(len(train_set)))
    bar = progress_bar(cfg.epochs * -(-len(order) // cfg.batch_size), "batch", cfg.progress, "reward model")
    for _ in range(cfg.epochs):
        rng.shuffle(order)
        for start in range(0, len(order), cfg.batch_size):
            chunk = order[start:start + cfg.batch_size]
            if cfg.train_backbone:
                seqs = [train_set[i][0] for i in chunk] + [train_set[i][1] for i in chunk]
                scores = last_token_scores(model, seqs)
            else:
                hidden = torch.cat([torch.stack([feats[i][0] for i in chunk]), torch.stack([feats[i][1] for i in chunk])])
                scores = model.score(hidden)[:, 0].float()
            loss = -F.logsigmoid(scores[:len(chunk)] - scores[len(chunk):]).mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            steps += 1
            bar.update(1)
            bar.set_postfix_str(f"loss={float(loss.detach()):.3f}", refresh=False)
    bar.close()
    return steps


class RewardModelScorer:
    """Scores with an ``AutoModelForSequenceClassification`` (one label) at the last valid token.

    The score head is applied to the final hidden states and read at index ``length - 1`` of
    each right-padded sequence, so an EOS that equals the pad token is still scored. With a
    ``normalization`` (see :mod:`rlkit.rlhf.score_norm`, set by :meth:`calibrate`) the raw score is
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
