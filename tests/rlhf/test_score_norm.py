"""Reward-model score normalization by the initial policy's responses (Ziegler et al. §2.2)."""

import numpy as np
import pytest

from rlkit.rlhf.reward_model import RewardModelScorer
from rlkit.rlhf.score_norm import ScoreNormalization
from rlkit.errors import ScoreNormalizationError
from rlkit.rlhf.score_norm import NORMALIZATION_FILE
from tests import tiny_lm


def test_per_prompt_fit_centres_each_prompt_and_scales_the_spread_within_prompts():
    rng = np.random.default_rng(0)
    prompts = [[3, 4], [3, 4, 5], [7]] * 20
    offsets = {(3, 4): 10.0, (3, 4, 5): -5.0, (7,): 0.5}
    raw = np.array([offsets[tuple(p)] + 2.0 * rng.standard_normal() for p in prompts])
    norm = ScoreNormalization.fit(prompts, raw, per_prompt=True)
    seqs = [p + [9, 9] for p in prompts]  # prompt + response: the longest matching prompt decides
    out = norm.apply(seqs, raw)
    for key in offsets:
        rows = [i for i, p in enumerate(prompts) if tuple(p) == key]
        assert abs(out[rows].mean()) < 1e-5
    assert out.std() == pytest.approx(1.0, abs=1e-5)
    within = raw - np.array([raw[[j for j, q in enumerate(prompts) if q == p]].mean() for p in prompts])
    assert norm.scale == pytest.approx(within.std())
    # the order of responses to one prompt never changes
    rows = [i for i, p in enumerate(prompts) if p == [7]]
    assert (np.argsort(out[rows]) == np.argsort(raw[rows])).all()
    # a prompt never seen in calibration gets the mean of the prompt means
    assert norm.apply([[8, 8, 1]], np.array([4.0]))[0] == pytest.approx((4.0 - np.mean(list(norm.prompt_shift.values()))) / norm.scale)


def test_global_fit_is_mean_zero_std_one():
    raw = np.array([1.0, 2.0, 3.0, 6.0])
    norm = ScoreNormalization.fit([[1]] * 4, raw, per_prompt=False)
    out = norm.apply([[1, 2]] * 4, raw)
    assert out.mean() == pytest.approx(0.0, abs=1e-6) and out.std() == pytest.approx(1.0, abs=1e-6)
    assert not norm.prompt_shift


def test_save_load_round_trip_and_bad_input_is_one_line(tmp_path):
    norm = ScoreNormalization.fit([[1, 2], [1, 2], [5], [5]], [0.0, 2.0, 4.0, 8.0])
    norm.save(tmp_path / "n.json")
    assert ScoreNormalization.load(tmp_path / "n.json") == norm
    for prompts, raw, match in [([[1]] * 3, [1.0, 1.0, 1.0], "do not vary"), ([[1]] * 2, [0.0, np.nan], "NaN"),
                                ([[1]], [0.0, 1.0], "equal count"), ([[1], [2]], [0.0, 1.0], ">= 2 responses")]:
        with pytest.raises(ScoreNormalizationError, match=match) as err:
            ScoreNormalization.fit(prompts, raw)
        assert "\n" not in str(err.value)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ScoreNormalizationError, match="cannot read"):
        ScoreNormalization.load(tmp_path / "bad.json")


def test_scorer_calibration_normalizes_the_reward_and_the_trainer_loads_it(tmp_path):
    rm = tiny_lm.reward_model()
    scorer = RewardModelScorer(rm)
    prompts = [[3, 4], [7, 8, 4]] * 6
    rng = np.random.default_rng(1)
    responses = [rng.integers(3, len(tiny_lm.WORDS), rng.integers(1, 5)).tolist() + [1] for _ in prompts]
    raw = scorer.raw_scores([p + r for p, r in zip(prompts, responses)])
    norm = scorer.calibrate(prompts, responses)
    scores = scorer.score_ids([p + r for p, r in zip(prompts, responses)])
    assert np.allclose(scores, norm.apply([p + r for p, r in zip(prompts, responses)], raw), atol=1e-6)
    assert abs(scores[0::2].mean()) < 1e-5 and abs(scores[1::2].mean()) < 1e-5 and not np.allclose(scores, raw)

    # RLHFTrainer applies the normalization saved beside a reward model it loads by path
    from rlkit.rlhf.trainer import RLHFTrainer
    from rlkit.rlhf.config import RLHFConfig

    tok = tiny_lm.tokenizer()
    rm.config.pad_token_id = tok.pad_token_id
    rm.save_pretrained(tmp_path / "rm")
    norm.save(tmp_path / "rm" / NORMALIZATION_FILE)
    cfg = RLHFConfig(reward_model=str(tmp_path / "rm"), num_envs=2, num_minibatches=1, max_new_tokens=3, iterations=1,
                     logdir=str(tmp_path / "runs"), torch_threads=1, save_model=False)
    trainer = RLHFTrainer(cfg, policy=tiny_lm.causal_lm(), tokenizer=tok, prompts=["the movie was", "i liked it"])
    assert trainer.scorer is not None and trainer.scorer.normalization == norm


def test_a_corrupt_normalization_file_is_one_cli_line(tmp_path, capsys):
    """The CLI once listed error types by hand and missed this one: a traceback."""
    from rlkit.cli import main

    policy_dir, rm_dir = tmp_path / "policy", tmp_path / "rm"
    tok = tiny_lm.tokenizer()
    tiny_lm.causal_lm().save_pretrained(policy_dir)
    tok.save_pretrained(policy_dir)
    tiny_lm.reward_model().save_pretrained(rm_dir)
    (rm_dir / NORMALIZATION_FILE).write_text("{not json")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the movie was\n")
    capsys.readouterr()
    code = main(["rlhf", "--policy", str(policy_dir), "--reward-model", str(rm_dir), "--prompts", str(prompts),
                 "--iterations", "1", "--num-envs", "2", "--num-minibatches", "1", "--logdir", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("rlkit: error: cannot read score normalization")


@pytest.mark.parametrize("text", ['{"scale": 0, "shift": 0}', '{"scale": -1.5, "shift": 0}', '{"scale": 1, "shift": NaN}',
                                  '{"scale": 1e999, "shift": 0}', '{"scale": true, "shift": 0}', "[1, 2]",
                                  '{"scale": 1, "shift": 0, "prompt_shift": [[[1, 2], "x"]]}',
                                  '{"scale": 1, "shift": 0, "prompt_shift": [[[1.5], 0.0]]}'])
def test_a_normalization_file_of_the_wrong_shape_is_refused_naming_it(tmp_path, text):
    """Valid JSON whose scale is 0 or negative would turn every score into inf or flip its sign."""
    path = tmp_path / NORMALIZATION_FILE
    path.write_text(text)
    with pytest.raises(ScoreNormalizationError, match="cannot read score normalization") as info:
        ScoreNormalization.load(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
