"""Where a reward model's score varies on the SmolLM2 sentiment task: between openings or within one.

Samples ``--per-prompt`` continuations of each shipped opening from SmolLM2-135M-Instruct, scores
them with the reward model at ``RM_DIR`` (raw, no normalization) and with VADER, and prints the
raw score's spread between openings (std of per-opening means) and within them (std around each
opening's mean), and its correlation with VADER overall and within openings. This is the
measurement behind the per-prompt score normalization (``rlkit/rlhf/score_norm.py``).

    python experiments/rm_variance.py runs/rlhf_sentiment6/reward_model --per-prompt 4 --seed 123
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rm_dir", help="the reward model's folder (rlkit rm train --output, or an RLHF run's reward_model/)")
    parser.add_argument("--per-prompt", type=int, default=4, help="continuations sampled per opening")
    parser.add_argument("--max-new-tokens", type=int, default=24, help="tokens per continuation at most")
    parser.add_argument("--seed", type=int, default=123, help="sampling seed")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlkit.rlhf.models import load_model
    from rlkit.rlhf.reward_model import RewardModelScorer
    from experiments.rlhf_sentiment import HERE, chat_prompts, sample_continuations, vader
    from experiments.smollm2 import prepare

    model_dir = prepare()
    tok = AutoTokenizer.from_pretrained(model_dir)
    openings = [x.strip() for x in (HERE / "data" / "review_openings.txt").read_text().splitlines() if x.strip()]
    prompts = chat_prompts(tok, openings)
    base = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    conts = sample_continuations(base, tok, prompts, args.per_prompt, args.max_new_tokens, args.seed)
    flat_p = [p for p, c in zip(prompts, conts) for _ in c]
    flat_r = [r for c in conts for r in c]
    gold = np.array(vader()(flat_r))
    raw = np.array(RewardModelScorer(load_model(args.rm_dir, "seq-cls"), tok)(flat_p, flat_r), dtype=np.float64)
    by_prompt = raw.reshape(len(prompts), args.per_prompt)
    gold_by_prompt = gold.reshape(len(prompts), args.per_prompt)
    within = (by_prompt - by_prompt.mean(1, keepdims=True)).ravel()
    gold_within = (gold_by_prompt - gold_by_prompt.mean(1, keepdims=True)).ravel()
    print(json.dumps({
        "responses": len(raw), "rm_mean": raw.mean(), "rm_std": raw.std(),
        "rm_std_between_openings": by_prompt.mean(1).std(), "rm_std_within_openings": within.std(),
        "corr_rm_gold": np.corrcoef(raw, gold)[0, 1], "corr_rm_gold_within_openings": np.corrcoef(within, gold_within)[0, 1],
    }, indent=1))


if __name__ == "__main__":
    main()
