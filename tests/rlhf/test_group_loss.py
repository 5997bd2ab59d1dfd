"""The group variant's loss forms (dapo, grpo, dr_grpo), its reward scaling (group, batch, none),
frac_reward_zero_std, and a run without a KL penalty loading no reference model."""

import pytest
import torch

from rlkit.core.config import PPOConfig
from rlkit.core.objective import CLIPPED_SURROGATE, ObjectiveInputs
from rlkit.core.token_grid import LMRollout
from rlkit.errors import ConfigError
from rlkit.rlhf.trainer import RLHFTrainer
from rlkit.variants.group import GroupAdvantages, GroupOptions, grpo_advantages
from rlkit.variants.loss_type import SequenceAggregated, aggregate_tokens
from tests import tiny_lm
from tests.rlhf.test_group import PROMPTS, cfg, two_prompts_three_samples


def test_token_losses_aggregate_by_hand():
    losses, segments = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([0, 0, 0, 1])
    assert aggregate_tokens(losses, segments, "dapo", 4) == 2.5  # 10 / 4 tokens
    assert aggregate_tokens(losses, segments, "grpo", 4) == 3.0  # (2 + 4) / 2 responses
    assert aggregate_tokens(losses, segments, "dr_grpo", 4) == 1.25  # 10 / (2 responses x 4)


def inputs(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = sum(lengths)
    new = (torch.randn(n, generator=g) * 0.3).requires_grad_()
    segments = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    zeros = torch.zeros(n)
    return ObjectiveInputs(new, torch.zeros(n), torch.randn(n, generator=g), zeros, zeros, zeros, torch.ones(n),
                           segments=segments), new


def test_grpo_equals_the_token_mean_when_responses_are_equally_long_and_weighs_responses_equally_otherwise():
    hp = PPOConfig()
    same, _ = inputs([3, 3, 3])
    default, grpo = CLIPPED_SURROGATE(same, hp), SequenceAggregated("grpo", 3)(same, hp)
    torch.testing.assert_close(grpo.loss, default.loss)
    torch.testing.assert_close(SequenceAggregated("dr_grpo", 3)(same, hp).loss, default.loss)  # full length: the same
    uneven, _ = inputs([1, 5])
    with pytest.raises(ValueError, match="whole sequences"):
        SequenceAggregated("grpo", 5)(uneven._replace(segments=None), hp)


def test_grpo_per_response_weights_by_gradient():
    hp = PPOConfig(norm_adv=False, clip_coef=10.0)  # no clipping: the loss is linear in the ratio near r = 1
    n = 6
    new = torch.zeros(n, requires_grad=True)
    adv = torch.ones(n)
    segments = torch.tensor([0, 1, 1, 1, 1, 1])
    x = ObjectiveInputs(new, torch.zeros(n), adv, torch.zeros(n), torch.zeros(n), torch.zeros(n), torch.ones(n),
                        segments=segments)
    grads = {}
    for form in ("grpo", "dr_grpo"):
        new.grad = None
        SequenceAggregated(form, 8)(x, hp).loss.backward()
        grads[form] = -new.grad.clone()
    torch.testing.assert_close(grads["grpo"], torch.tensor([1 / 2] + [1 / 10] * 5))  # 1/(S * L_i)
    torch.testing.assert_close(grads["dr_grpo"], torch.full((n,), 1 / 16))  # 1/(S * max_new_tokens)


def test_grpo_advantages_scaled_by_group_batch_or_nothing():
    returns = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 6.0]])
    centred = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, -2.0, 4.0]])
    torch.testing.assert_close(grpo_advantages(returns, 0.0, "none"), centred)
    torch.testing.assert_close(grpo_advantages(returns, 0.0, "batch"), centred / returns.std())
    torch.testing.assert_close(grpo_advantages(returns, 0.0, "group"), centred / returns.std(-1, keepdim=True))


def test_frac_reward_zero_std_counts_groups_whose_scores_are_all_equal():
    grid = two_prompts_three_samples()
    scores = torch.zeros_like(grid.rewards)
    scores[0, 3:] = 1.0  # the second prompt's three answers all score 1; the first's all 0
    scores[0, 0] = 0.5  # ... but one of the first prompt's scores 0.5
    _, stats = GroupAdvantages(GroupOptions(group_size=3, group_form="grpo")).batches(LMRollout(grid, scores), 0)
    assert stats["group/frac_reward_zero_std"] == 0.5


def test_loss_forms_and_scaling_run_are_labelled_and_refused_where_they_mean_nothing(logdir):
    results = {}
    for loss in ("dapo", "grpo", "dr_grpo"):
        trainer = RLHFTrainer(cfg(logdir, group_form="grpo", loss_type=loss, group_scale="batch", run_name=loss,
                                  iterations=2), reward=tiny_lm.good_rate, policy=tiny_lm.causal_lm(),
                              tokenizer=tiny_lm.tokenizer(), prompts=PROMPTS)
        trainer.train()
        assert trainer.learner.objective.name == ("clip" if loss == "dapo" else f"clip-{loss}")
        results[loss] = trainer.learner.flat.data.clone()
    assert not torch.equal(results["dapo"], results["grpo"]) and not torch.equal(results["grpo"], results["dr_grpo"])
    assert cfg(logdir, group_form="grpo", loss_type="dr_grpo", group_scale="none").variant == \
        "grpo-g4-scalenone+drgrpo"
    with pytest.raises(ConfigError, match="at most one|both"):
        cfg(logdir, loss_type="grpo", unclipped=True)
    with pytest.raises(ConfigError, match="RLOO's are not scaled"):
        cfg(logdir, group_form="rloo", group_scale="batch")


def test_no_kl_penalty_loads_no_reference_and_logs_no_kl(logdir):
    trainer = RLHFTrainer(cfg(logdir, kl_coef=0.0, iterations=2), reward=tiny_lm.good_rate,
                          policy=tiny_lm.causal_lm(), tokenizer=tiny_lm.tokenizer(), prompts=PROMPTS)
    assert trainer.reference is None
    out = trainer.train()
    assert all("charts/kl" not in h and "charts/kl_coef" not in h for h in out.history)
    h = out.history[-1]
    assert 1 <= h["charts/response_length_min"] <= h["charts/response_length"] <= h["charts/response_length_max"] <= 4
    assert h["charts/truncated_share"] == pytest.approx(1 - h["charts/eos_rate"])
    with_penalty = RLHFTrainer(cfg(logdir, kl_coef=0.1, iterations=1, run_name="kl"), reward=tiny_lm.good_rate,
                               policy=tiny_lm.causal_lm(), tokenizer=tiny_lm.tokenizer(), prompts=PROMPTS)
    assert with_penalty.reference is not None and "charts/kl" in with_penalty.train().history[-1]
