"""Loading ``transformers`` models from local paths (or the local hub cache)."""

from __future__ import annotations

from typing import Any

import torch

from rlkit.errors import LLMEnvError


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
