"""Normalizing a reward model's score by the initial policy's responses.

Ziegler et al. (2019, "Fine-Tuning Language Models from Human Preferences", §2.2) normalize the
reward model so that the initial policy's responses score mean 0 and variance 1: the KL
coefficient β and the value head then see rewards on a known scale whatever the reward model's
raw range.

A Bradley-Terry model trained only on pairs that share a prompt is told nothing about scores
across prompts: each prompt's offset is free, and a linear probe on a frozen trunk fills it with
whatever the prompt's features give (on the SmolLM2 sentiment task most of the raw score's
variance is between prompts). Subtracting each prompt's own mean (``per_prompt=True``) removes
that offset, which is the same for every response to a prompt and so never changes which
response is preferred; the PPO advantages stop carrying it as noise.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from rlkit.errors import ScoreNormalizationError


NORMALIZATION_FILE = "score_normalization.json"
"""Kept beside a reward model's weights; ``RLHFTrainer`` applies it when it loads that model."""


@dataclass(frozen=True)
class ScoreNormalization:
    """``normalized = (raw - shift_of(prompt)) / scale``. A sequence whose prompt has its own
    shift (matched as a prefix of prompt + response) uses it; any other uses ``shift``."""

    scale: float = 1.0
    shift: float = 0.0
    prompt_shift: Mapping[tuple[int, ...], float] = field(default_factory=dict)

    @classmethod
    def fit(cls, prompts: Sequence[Sequence[int]], raw: Sequence[float], per_prompt: bool = True) -> ScoreNormalization:
        """From raw scores ``[B]`` of the initial policy's responses to ``prompts [B]`` (token ids).
        Per prompt: each prompt's mean is its shift, ``shift`` the mean of those means, and
        ``scale`` the standard deviation of scores around their prompt's mean. Otherwise one mean
        and one standard deviation over all responses."""
        values = np.asarray(raw, dtype=np.float64)
        if len(prompts) != len(values) or len(values) < 2:
            raise ScoreNormalizationError(f"need >= 2 (prompt, score) pairs of equal count, got {len(prompts)} "
                                          f"prompts and {len(values)} scores")
        if not np.isfinite(values).all():
            raise ScoreNormalizationError("reward-model scores contain NaN or inf")
        if not per_prompt:
            return cls(scale=_positive_std(values), shift=float(values.mean()))
        groups: dict[tuple[int, ...], list[float]] = {}
        for p, v in zip(prompts, values):
            groups.setdefault(tuple(int(t) for t in p), []).append(float(v))
        means = {k: float(np.mean(v)) for k, v in groups.items()}
        if all(len(v) < 2 for v in groups.values()):
            raise ScoreNormalizationError("per-prompt normalization needs >= 2 responses for some prompt")
        centred = np.concatenate([np.asarray(v) - means[k] for k, v in groups.items() if len(v) > 1])
        return cls(scale=_positive_std(centred), shift=float(np.mean(list(means.values()))), prompt_shift=means)

    def apply(self, sequences: Sequence[Sequence[int]], raw: np.ndarray) -> np.ndarray:
        """``[B]`` normalized scores of whole sequences (prompt + response) given their raw scores."""
        lengths = sorted({len(k) for k in self.prompt_shift}, reverse=True)  # longest matching prompt wins
        shifts = np.full(len(sequences), self.shift, dtype=np.float64)
        for i, s in enumerate(sequences):
            for n in lengths:
                hit = self.prompt_shift.get(tuple(int(t) for t in s[:n])) if len(s) >= n else None
                if hit is not None:
                    shifts[i] = hit
                    break
        return ((np.asarray(raw, dtype=np.float64) - shifts) / self.scale).astype(np.float32)

    def save(self, path: str | os.PathLike) -> None:
        """JSON (no pickle): scale, shift and ``[[prompt ids], shift]`` rows."""
        rows = [[list(k), v] for k, v in self.prompt_shift.items()]
        with open(path, "w") as f:
            json.dump({"scale": self.scale, "shift": self.shift, "prompt_shift": rows}, f)

    @classmethod
    def load(cls, path: str | os.PathLike) -> ScoreNormalization:
        """The normalization saved at ``path``; one that does not read, or holds another shape (a
        scale that is not a finite number > 0, a shift that is not finite, prompt rows that are not
        ``[[token ids], shift]``), is a one-line :class:`ScoreNormalizationError` naming the file."""
        try:
            with open(path) as f:
                data = json.load(f)
            norm = cls(_finite(data["scale"]), _finite(data["shift"]),
                       {tuple(_token(t) for t in ids): _finite(v) for ids, v in data.get("prompt_shift", [])})
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ScoreNormalizationError(f"cannot read score normalization {str(path)!r}: {exc}") from None
        if not norm.scale > 0:
            raise ScoreNormalizationError(f"cannot read score normalization {str(path)!r}: scale {norm.scale} is "
                                          "not > 0")
        return norm


def _finite(value: object) -> float:
    """A finite JSON number as a float (else a ``ValueError`` naming it)."""
    if type(value) not in (int, float) or not np.isfinite(value):  # type: ignore[arg-type]
        raise ValueError(f"{value!r} is not a finite number")
    return float(value)  # type: ignore[arg-type]


def _token(value: object) -> int:
    """A token id (a JSON integer >= 0; else a ``ValueError`` naming it)."""
    if type(value) is not int or value < 0:
        raise ValueError(f"{value!r} is not a token id")
    return value


def _positive_std(values: np.ndarray) -> float:
    std = float(values.std())
    if not std > 1e-8:
        raise ScoreNormalizationError("reward-model scores of the calibration responses do not vary (std 0)")
    return std
