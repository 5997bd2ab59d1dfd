"""The tiny random models of :mod:`rlkit.rlhf.tiny` (no downloads) and a programmatic reward."""

from __future__ import annotations

from rlkit.rlhf.tiny import WORDS, causal_lm, config, reward_model, save_policy, save_reward_model, tokenizer

__all__ = ["WORDS", "causal_lm", "config", "reward_model", "tokenizer", "save_models", "good_rate"]


def save_models(root, prompts=("the movie was", "i liked it")):
    """A tiny policy and reward model saved as local folders (each with the tokenizer), and a
    prompt file: ``(policy_dir, rm_dir, prompts_file)`` under ``root``."""
    policy_dir, rm_dir, prompt_file = root / "policy", root / "rm", root / "prompts.txt"
    save_policy(policy_dir)
    save_reward_model(rm_dir)
    prompt_file.write_text("\n".join(prompts) + "\n")
    return policy_dir, rm_dir, prompt_file


def good_rate(prompts: list[str], responses: list[str]) -> list[float]:
    """The tiny RLHF runs' reward: the share of a 4-token response that is "good"."""
    return [r.split().count("good") / 4 for r in responses]
