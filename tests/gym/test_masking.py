"""Invalid-action masking: a masked action is never sampled, its logit gets no probability in the
loss, and on a toy env where an invalid action is fatal a run takes none, from either mask source."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlkit
from rlkit.errors import EnvError, ObservationError
from rlkit.gym.masking import MASKED_LOGIT, MaskedActorCritic, check_mask
from rlkit.gym.policies import MLPActorCritic
from rlkit.gym.trainer import PPOTrainer, resume
from rlkit.io.signals import Interrupted
from tests.test_reproducibility import _stop_after_update, assert_same_bits, final_tensors
from tests.toy_envs import MaskedFatal


def _model(n=5):
    return MaskedActorCritic(MLPActorCritic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(n), (16,)), n)


def test_masked_acting_never_samples_a_masked_action_and_matches_torch():
    model = _model()
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(4000, 3)).astype(np.float32)
    mask = rng.random((4000, 5)) < 0.4
    mask[np.arange(4000), rng.integers(0, 5, 4000)] = True
    x = np.concatenate([obs, mask.astype(np.float32)], axis=1)
    act = model.snapshot().act(x, rng)
    assert mask[np.arange(4000), act.actions].all()
    logits, values = model(torch.from_numpy(x))
    assert (logits[~torch.from_numpy(mask)] == MASKED_LOGIT).all()
    expected = torch.distributions.Categorical(logits=logits).log_prob(torch.from_numpy(act.actions))
    np.testing.assert_allclose(act.log_probs, expected.detach().numpy(), rtol=1e-5, atol=1e-5)
    entropy = model.head.entropy(logits)  # masked actions add nothing: p log p is 0, not NaN
    expected_entropy = torch.distributions.Categorical(logits=logits.masked_fill(~torch.from_numpy(mask),
                                                                                 -float("inf"))).entropy()
    torch.testing.assert_close(entropy, expected_entropy, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(model.snapshot().value(x), values.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mask", [np.ones(4, bool), np.zeros(5, bool), np.array([0, 2, 1, 0, 0]), None])
def test_a_bad_mask_is_a_value_error_naming_it(mask):
    with pytest.raises(ValueError, match="mask"):
        check_mask(mask, 5)


def _cfg(tmp_path, env, name, **kw):
    return rlkit.TrainConfig(env=env, total_steps=4096, num_envs=4, num_steps=64, num_minibatches=4, update_epochs=4,
                             checkpoint_every=512, eval_episodes=5, logdir=str(tmp_path), run_name=name,
                             progress=False, **kw)


@pytest.mark.parametrize("env", ["rlkit-test/MaskedFatal-v0", "rlkit-test/MaskedFatalInfo-v0"])
def test_a_masked_run_never_takes_an_invalid_action_and_learns(tmp_path, env):
    trainer = PPOTrainer(_cfg(tmp_path, env, "m"))
    assert trainer.agent.masked and not trainer.kernels.fused_mlp
    before = MaskedFatal.invalid
    result = trainer.train()
    assert MaskedFatal.invalid == before  # a random unmasked policy picks an invalid action 4 times in 6
    assert result.eval_return_mean >= 12.0


def test_a_masked_run_resumes_bit_identically_and_the_agent_acts_with_masks(tmp_path, monkeypatch):
    env = "rlkit-test/MaskedFatal-v0"
    whole = rlkit.train(_cfg(tmp_path, env, "whole"))
    with monkeypatch.context() as m:
        _stop_after_update(m, 3)
        with pytest.raises(Interrupted):
            rlkit.train(_cfg(tmp_path, env, "stopped"))
    resumed = resume(str(tmp_path / "stopped"))
    assert_same_bits(final_tensors(whole.run_dir), final_tensors(resumed.run_dir))
    assert resumed.eval_return_mean == whole.eval_return_mean
    agent = rlkit.load_agent(whole.run_dir)
    assert agent.masked
    obs = np.eye(6, dtype=np.float32)[2]
    only = np.zeros(6, bool)
    only[4] = True
    assert agent.act(obs, action_mask=only) == 4  # the mask wins over what the policy prefers
    with pytest.raises(ObservationError, match="mask"):
        agent.act(obs, action_mask=np.zeros(6, bool))


def test_masks_with_async_envs_are_refused_in_one_line(tmp_path):
    with pytest.raises(EnvError, match="async"):
        PPOTrainer(_cfg(tmp_path, "rlkit-test/MaskedFatal-v0", "a", async_envs=True))


@pytest.mark.parametrize("env", ["rlkit-test/MaskedFatal-v0", "rlkit-test/MaskedFatalInfo-v0"])
def test_the_maskable_ppo_baseline_reads_masks_as_rlkit_does(tmp_path, env):
    """sb3-contrib's MaskablePPO (the sweep's ``sb3-contrib:maskable-ppo``) trains and evaluates with
    the env's masks from either source: it never takes an invalid action."""
    pytest.importorskip("sb3_contrib")
    from rlkit.ablation.baselines import train_baseline

    cfg = _cfg(tmp_path, env, "b").replace(total_steps=1024, eval_every=512, eval_episodes=3).to_dict()
    before = MaskedFatal.invalid
    result = train_baseline("sb3-contrib:maskable-ppo", cfg, tmp_path / "b")
    assert MaskedFatal.invalid == before and result["total_steps"] == 1024 and len(result["eval_history"]) == 2
    assert result["eval_return_mean"] > 0 and (tmp_path / "b" / "result.json").is_file()
