"""Shared set-up of the LLM benchmarks: SmolLM2-135M-Instruct offline, chat-formatted review prompts."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from experiments.rlhf_sentiment import chat_prompts  # noqa: E402
from experiments.smollm2 import prepare  # noqa: E402


def setup(threads: int, prompt_style: str = "chat"):
    """Model dir, tokenizer and prompts: the review openings in SmolLM2's chat template (with its
    default system prompt, 46-62 tokens) or, with ``prompt_style="plain"``, the bare openings (4-12 tokens)."""
    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(threads)
    model_dir = prepare()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    openings = [x.strip() for x in (ROOT / "experiments" / "data" / "review_openings.txt").read_text().splitlines()
                if x.strip()]
    if prompt_style == "plain":
        return model_dir, tokenizer, openings
    return model_dir, tokenizer, chat_prompts(tokenizer, openings)
