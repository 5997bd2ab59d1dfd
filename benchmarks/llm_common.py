"""Shared set-up of the LLM benchmarks: SmolLM2-135M-Instruct offline, chat-formatted review prompts."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from experiments.rlhf_sentiment import chat_prompts  # noqa: E402
from experiments.smollm2 import prepare  # noqa: E402


def setup(threads: int):
    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(threads)
    model_dir = prepare()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    openings = [x.strip() for x in (ROOT / "experiments" / "data" / "review_openings.txt").read_text().splitlines()
                if x.strip()]
    return model_dir, tokenizer, chat_prompts(tokenizer, openings)
