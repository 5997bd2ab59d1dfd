"""Bradley-Terry reward-model trainer on a separable synthetic preference set."""

import json

import pytest

from rlkit.rlhf.reward_model import RMConfig, read_pairs, train_reward_model
from rlkit.errors import ConfigError
from tests import tiny_lm


def synthetic_pairs(n=60, seed=0):
    import random

    rng = random.Random(seed)
    prompts = ["the movie was", "i liked it", "a plot", "the plot was"]
    pairs = []
    for _ in range(n):
        filler = " ".join(rng.choice(["the", "movie", "was", "it", "a", "plot"]) for _ in range(rng.randint(0, 3)))
        pairs.append({"prompt": rng.choice(prompts), "chosen": f" {filler} great fun".strip(),
                      "rejected": f" {filler} awful boring".strip()})
    return pairs


def test_rm_trainer_reaches_high_accuracy_on_separable_pairs(tmp_path):
    data = tmp_path / "prefs.jsonl"
    data.write_text("\n".join(json.dumps(p) for p in synthetic_pairs()))
    cfg = RMConfig(data=str(data), output=str(tmp_path / "rm"), epochs=8, batch_size=8, learning_rate=3e-3,
                   torch_threads=1)
    result = train_reward_model(cfg, model=tiny_lm.reward_model(), tokenizer=tiny_lm.tokenizer())
    assert result.eval_pairs == 12 and result.train_pairs == 48
    assert result.eval_accuracy >= 0.9, result
    assert (tmp_path / "rm" / "model.safetensors").is_file()
    from rlkit.rlhf.models import load_model
    from rlkit.rlhf.reward_model import RewardModelScorer
    reloaded = RewardModelScorer(load_model(str(tmp_path / "rm"), "seq-cls"), tiny_lm.tokenizer())
    good, bad = reloaded(["the movie was"] * 2, [" great fun", " awful boring"])
    assert good > bad


def test_head_only_training_leaves_the_backbone_frozen(tmp_path):
    import torch

    model = tiny_lm.reward_model()
    trunk = {n: p.detach().clone() for n, p in model.named_parameters() if not n.startswith("score")}
    cfg = RMConfig(output=str(tmp_path / "rm"), epochs=30, batch_size=8, learning_rate=3e-2, train_backbone=False,
                   torch_threads=1)
    result = train_reward_model(cfg, model=model, tokenizer=tiny_lm.tokenizer(), pairs=synthetic_pairs())
    assert all(torch.equal(trunk[n], p.cpu()) for n, p in model.named_parameters() if n in trunk)
    assert result.eval_accuracy >= 0.9, result


def test_malformed_preference_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "chosen": "b"}\n')
    with pytest.raises(ConfigError, match="bad.jsonl:1") as e:
        read_pairs(str(bad))
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="not found"):
        read_pairs(str(tmp_path / "missing.jsonl"))
    with pytest.raises(ConfigError, match="eval_fraction"):
        RMConfig(eval_fraction=1.0)


def test_mean_pooling_is_saved_in_the_config_and_used_for_scoring(tmp_path):
    import torch

    from rlkit.rlhf.reward_model import last_token_hidden

    model = tiny_lm.reward_model()
    cfg = RMConfig(output=str(tmp_path / "rm"), epochs=1, pooling="mean", train_backbone=False, torch_threads=1)
    train_reward_model(cfg, model=model, tokenizer=tiny_lm.tokenizer(), pairs=synthetic_pairs(10))
    assert model.config.rlkit_pooling == "mean"
    seqs = [[3, 4, 5], [6, 7]]
    pooled = last_token_hidden(model, seqs)
    alone = model.base_model(input_ids=torch.tensor([seqs[0]], device=model.device)).last_hidden_state[0].mean(0)
    torch.testing.assert_close(pooled[0], alone, atol=1e-5, rtol=0)
    from rlkit.rlhf.models import load_model
    assert load_model(str(tmp_path / "rm"), "seq-cls").config.rlkit_pooling == "mean"
