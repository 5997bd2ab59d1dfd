"""Tiny random ``transformers`` models, a locally built tokenizer (no downloads) and a programmatic reward."""

from __future__ import annotations

import torch

WORDS = ["<pad>", "<eos>", "<unk>"] + "the movie was good bad great awful fun boring i liked it not a plot".split()


def tokenizer(pad_is_eos: bool = True):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>",
                                   pad_token="<eos>" if pad_is_eos else "<pad>")


def config(**kw):
    from transformers import LlamaConfig

    base = dict(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, eos_token_id=1,
                pad_token_id=1)
    return LlamaConfig(**{**base, **kw})


def causal_lm(seed: int = 0):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(config()).eval().requires_grad_(False)


def reward_model(seed: int = 1):
    from transformers import LlamaForSequenceClassification

    torch.manual_seed(seed)
    return LlamaForSequenceClassification(config(num_labels=1, id2label={0: "score"}, label2id={"score": 0})
                                          ).eval().requires_grad_(False)


def save_models(root, prompts=("the movie was", "i liked it")):
    """A tiny policy and reward model saved as local folders (each with the tokenizer), and a
    prompt file: ``(policy_dir, rm_dir, prompts_file)`` under ``root``."""
    tok = tokenizer()
    policy_dir, rm_dir, prompt_file = root / "policy", root / "rm", root / "prompts.txt"
    causal_lm().save_pretrained(policy_dir)
    tok.save_pretrained(policy_dir)
    rm = reward_model()
    rm.config.pad_token_id = tok.pad_token_id
    rm.save_pretrained(rm_dir)
    tok.save_pretrained(rm_dir)
    prompt_file.write_text("\n".join(prompts) + "\n")
    return policy_dir, rm_dir, prompt_file


def good_rate(prompts: list[str], responses: list[str]) -> list[float]:
    """The tiny RLHF runs' reward: the share of a 4-token response that is "good"."""
    return [r.split().count("good") / 4 for r in responses]
