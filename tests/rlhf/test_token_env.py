"""The token-level LLM environment with tiny random models; no downloads."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from rlkit.errors import LLMEnvError
from rlkit.rlhf.models import load_model
from rlkit.rlhf.reward_model import RewardModelScorer
from rlkit_envs import TokenEnv
from tests import tiny_lm

pytest.importorskip("transformers")


def count_good(prompts, responses):
    return [float(r.split().count("good")) for r in responses]


def make(**kw):
    tok = tiny_lm.tokenizer()
    base = dict(prompts=["the movie was", "i liked it", "a plot"], reward=count_good, vocab_size=len(tiny_lm.WORDS),
                eos_token_id=tok.eos_token_id, max_new_tokens=4, tokenizer=tok)
    return TokenEnv(**{**base, **kw})


def test_env_checker_passes():
    check_env(make(), skip_render_check=True)


def test_reward_only_at_the_end_and_eos_terminates():
    env = make()
    obs, info = env.reset(seed=0, options={"prompt": 0})
    assert obs["attention_mask"].sum() == 3
    good, eos = tiny_lm.WORDS.index("good"), 1
    steps = [env.step(good), env.step(good), env.step(eos)]
    assert [s[1] for s in steps] == [0.0, 0.0, 2.0]
    assert steps[-1][2] is True and steps[-1][3] is False
    final_obs = steps[-1][0]
    assert final_obs["attention_mask"].sum() == 6 and final_obs["input_ids"][5] == eos  # EOS counted although pad == eos


def test_truncation_and_missing_eos_penalty():
    env = make(missing_eos_penalty=-1.5)
    env.reset(seed=0, options={"prompt": 1})
    good = tiny_lm.WORDS.index("good")
    out = [env.step(good) for _ in range(4)]
    assert [o[3] for o in out] == [False, False, False, True] and not any(o[2] for o in out)
    assert out[-1][1] == pytest.approx(4.0 - 1.5) and out[-1][4]["eos"] is False
    env.reset(seed=0, options={"prompt": 1})
    env.step(good)
    assert env.step(1)[1] == pytest.approx(1.0)  # with EOS: no penalty


def test_reward_model_scores_the_last_valid_token_even_when_pad_is_eos():
    rm = tiny_lm.reward_model()
    scorer = RewardModelScorer(rm)
    seqs = [[3, 4, 5, 1], [3, 4, 1], [7, 1, 1, 1, 1]]  # EOS (== pad) ends each response
    scores = scorer.score_ids(seqs)
    pad = rm.config.pad_token_id
    rm.config.pad_token_id = None  # batch of one, no padding: transformers pools the very last token
    try:
        for seq, score in zip(seqs, scores):
            alone = rm(torch.tensor([seq])).logits[0, 0]
            assert float(score) == pytest.approx(float(alone), abs=1e-5)
    finally:
        rm.config.pad_token_id = pad
    # With pad == eos, pooling by `ids != pad_id` would score the token before the EOS instead:
    assert float(rm(torch.tensor([seqs[0]])).logits[0, 0]) != pytest.approx(float(scores[0]), abs=1e-5)
    env = make(reward=scorer)
    env.reset(seed=0, options={"prompt": 0})
    env.step(6)
    reward = env.step(1)[1]
    assert reward == pytest.approx(float(scorer.score_ids([[3, 4, 5, 6, 1]])[0]), abs=1e-6)


def test_vectorized_with_autoreset_draws_new_prompts():
    envs = gym.make_vec("rlkit/TokenLM-v0", num_envs=3, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
                        prompts=[[3, 4], [5], [6, 7, 8]], reward=count_good, vocab_size=len(tiny_lm.WORDS),
                        eos_token_id=1, max_new_tokens=2)
    obs, _ = envs.reset(seed=0)
    assert obs["input_ids"].shape == (3, 5)
    obs, rew, term, trunc, info = envs.step(np.array([1, 1, 1]))
    assert term.all() and "final_obs" in info
    assert all(m <= 3 for m in obs["attention_mask"].sum(1))  # fresh prompts, no response yet
    for final in info["final_obs"]:  # the finished episode: its prompt, then the EOS just taken
        n = int(final["attention_mask"].sum())
        assert n - 1 in (1, 2, 3) and final["input_ids"][n - 1] == 1


@pytest.mark.parametrize("kw,match", [
    (dict(prompts=[]), "empty prompt dataset"),
    (dict(prompts=["the movie was good good good"], max_length=8), "exceeds the context"),
    (dict(max_new_tokens=0), "max_new_tokens"),
])
def test_bad_input_is_one_line(kw, match):
    with pytest.raises(LLMEnvError, match=match) as e:
        make(**kw)
    assert "\n" not in str(e.value)


def test_unknown_model_path_is_one_line(tmp_path):
    with pytest.raises(LLMEnvError, match="cannot load model") as e:
        load_model(str(tmp_path / "no-such-model"))
    assert "\n" not in str(e.value)


def test_prefetched_scores_equal_direct_scores():
    scorer = RewardModelScorer(tiny_lm.reward_model())
    seqs = [[3, 4, 5, 1], [3, 4, 1], [7, 8, 9, 10, 1]]
    direct = [float(scorer.score_ids([s])[0]) for s in seqs]
    scorer.prefetch(seqs)  # one padded batch
    assert scorer.score_ids(seqs[::-1]).tolist() == pytest.approx(direct[::-1], abs=1e-5)
    assert scorer._prefetched == {}


def test_reward_model_scorer_scores_a_repeated_sequence_in_one_call():
    scorer = RewardModelScorer(tiny_lm.reward_model())
    twice = scorer.score_ids([[3, 4, 1], [3, 4, 1], [5, 1]])
    assert twice[0] == twice[1] and twice[0] == pytest.approx(scorer.score_ids([[3, 4, 1]])[0], abs=1e-5)
