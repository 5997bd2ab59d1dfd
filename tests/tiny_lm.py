"""The tiny random models of :mod:`rlkit.rlhf.tiny` (no downloads) and a programmatic reward."""

from __future__ import annotations

from rlkit.rlhf.tiny import WORDS, causal_lm, config, reward_model, save_policy, save_reward_model, tokenizer

__all__ = ["WORDS", "causal_lm", "config", "reward_model", "tokenizer", "save_models", "good_rate", "reward_task"]


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


def reward_task(root, rewards_source: str, rows: list[dict]):
    """A reward-function task under ``root``: ``rewards.py`` holding ``rewards_source``, a
    ``prompts.jsonl`` of ``rows`` and the tiny policy; returns ``(root, policy_dir)``."""
    import json

    (root / "rewards.py").write_text(rewards_source)
    (root / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    policy_dir, _, _ = save_models(root)
    return root, policy_dir
