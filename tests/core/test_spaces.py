"""Every supported Gymnasium space: the MultiDiscrete / MultiBinary heads against torch.distributions,
the observation encoders, and training on envs with such spaces."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Bernoulli, Categorical

import rlkit
from rlkit import UnsupportedSpaceError, make_head
from rlkit.core.encoders import encode_items, make_encoder
from rlkit.core.normalization import ObsNormalizer
from rlkit.errors import ObservationError
from rlkit.gym.policies import MLPActorCritic
from rlkit.gym.trainer import resume
from rlkit.io.signals import Interrupted
from tests.test_reproducibility import _stop_after_update, assert_same_bits, final_tensors


def test_multi_categorical_matches_torch_distributions():
    torch.manual_seed(0)
    head = make_head(gym.spaces.MultiDiscrete([3, 5, 2], start=[1, 0, -1]))
    logits = torch.randn(64, 10) * 3
    actions = torch.stack([torch.randint(0, k, (64,)) for k in (3, 5, 2)], dim=-1)
    parts = [Categorical(logits=x) for x in logits.split([3, 5, 2], dim=-1)]
    logp, ent = head.log_prob_entropy(logits, actions)
    torch.testing.assert_close(logp, sum(d.log_prob(actions[:, i]) for i, d in enumerate(parts)))
    torch.testing.assert_close(ent, sum(d.entropy() for d in parts))
    torch.testing.assert_close(head.entropy(logits), ent)
    np.testing.assert_array_equal(head.to_env(np.array([[0, 4, 1]])), [[1, 4, 0]])  # the space's start added
    assert gym.spaces.MultiDiscrete([3, 5, 2], start=[1, 0, -1]).contains(head.to_env(np.array([[2, 0, 0]]))[0])


def test_bernoulli_matches_torch_distributions():
    torch.manual_seed(0)
    head = make_head(gym.spaces.MultiBinary(4))
    logits = torch.randn(64, 4) * 3
    actions = torch.randint(0, 2, (64, 4)).float()
    ref = Bernoulli(logits=logits)
    torch.testing.assert_close(head.log_prob(logits, actions), ref.log_prob(actions).sum(-1))
    torch.testing.assert_close(head.entropy(logits), ref.entropy().sum(-1))
    env_actions = head.to_env(actions.numpy())
    assert env_actions.dtype == np.int8 and gym.spaces.MultiBinary(4).contains(env_actions[0])


def test_shaped_spaces_round_trip_through_the_env_shape():
    head = make_head(gym.spaces.MultiBinary((2, 3)))
    assert head.out_dim == 6 and head.to_env(np.ones((5, 6), np.float32)).shape == (5, 2, 3)
    head = make_head(gym.spaces.MultiDiscrete([[2, 3], [4, 5]]))
    assert head.out_dim == 14 and head.to_env(np.zeros((5, 4), np.int64)).shape == (5, 2, 2)


@pytest.mark.parametrize("space", [gym.spaces.MultiDiscrete([3, 4]), gym.spaces.MultiBinary(3)])
def test_numpy_acting_matches_the_torch_head(space):
    torch.manual_seed(0)
    model = MLPActorCritic(gym.spaces.Box(-5, 5, (4,)), space)
    with torch.no_grad():  # far from uniform, so the check has teeth
        model.actor[-1].weight.mul_(300.0)
    obs = np.random.default_rng(0).normal(size=(256, 4)).astype(np.float32)
    res = model.snapshot().act(obs, np.random.default_rng(1))
    params, _ = model(torch.from_numpy(obs))
    np.testing.assert_allclose(res.log_probs, model.head.log_prob(params, torch.from_numpy(res.actions)).detach().numpy(),
                               atol=1e-4)
    np.testing.assert_array_equal(model.snapshot().mode(obs), model.head.mode(params).numpy())


@pytest.mark.parametrize("space", [gym.spaces.MultiDiscrete([3, 2]), gym.spaces.MultiBinary(3)])
def test_numpy_sampling_frequencies(space):
    torch.manual_seed(0)
    model = MLPActorCritic(gym.spaces.Box(-5, 5, (2,)), space)
    with torch.no_grad():
        model.actor[-1].bias.copy_(torch.linspace(-1.0, 1.0, model.head.out_dim))
    obs = np.zeros((100_000, 2), np.float32)
    actions = torch.from_numpy(model.snapshot().act(obs, np.random.default_rng(0)).actions)
    params = model(torch.from_numpy(obs[:1]))[0]
    dims = [3, 2] if isinstance(space, gym.spaces.MultiDiscrete) else None
    if dims:
        for d, part in enumerate(params.split(dims, dim=-1)):
            freq = np.bincount(actions[:, d].numpy(), minlength=dims[d]) / len(obs)
            np.testing.assert_allclose(freq, torch.softmax(part, -1)[0].detach().numpy(), atol=0.006)
    else:
        np.testing.assert_allclose(actions.float().mean(0).numpy(), torch.sigmoid(params)[0].detach().numpy(),
                                   atol=0.006)


def test_encoders_by_space():
    space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,)), "cell": gym.spaces.Discrete(3, start=1),
                             "keys": gym.spaces.MultiDiscrete([2, 3]), "flags": gym.spaces.MultiBinary(2),
                             "pair": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (1,))))})
    enc = make_encoder(space)
    obs = {"pos": np.array([0.5, -0.25], np.float32), "cell": 3, "keys": np.array([1, 2]),
           "flags": np.array([1, 0], np.int8), "pair": (1, np.array([0.75], np.float32))}
    row = encode_items(enc, [obs, obs])
    # Dict keys in the space's (sorted) order: cell, flags, keys, pair, pos
    expected = [0, 0, 1] + [1, 0] + [0, 1, 0, 0, 1] + [0, 1, 0.75] + [0.5, -0.25]
    np.testing.assert_array_equal(row, [expected, expected])
    assert enc.dim == len(expected)
    np.testing.assert_array_equal(enc.continuous, [c in (0.75, 0.5, -0.25) and i in (12, 13, 14)
                                                   for i, c in enumerate(expected)])


def test_one_hot_refuses_values_outside_the_space():
    enc = make_encoder(gym.spaces.Discrete(3))
    with pytest.raises(ValueError):
        enc.batch(np.array([3]), 1)
    with pytest.raises(ValueError):
        enc.batch(np.array([-1]), 1)


def test_normalization_leaves_one_hot_columns_alone():
    enc = make_encoder(gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-10, 10, (1,)))))
    norm = ObsNormalizer((enc.dim,), True, scaled=enc.continuous)
    rng = np.random.default_rng(0)
    for _ in range(50):
        out = norm(encode_items(enc, [(int(rng.integers(2)), rng.normal(5, 3, 1).astype(np.float32))]), update=True)
    assert set(np.unique(out[:, :2])) <= {0.0, 1.0} and out[:, :2].sum() == 1.0
    assert abs(float(norm(np.array([[0, 1, 5.0]], np.float32), update=False)[0, 2])) < 0.5  # the Box part is scaled


@pytest.mark.parametrize("space", [gym.spaces.Text(5), gym.spaces.Sequence(gym.spaces.Discrete(2)),
                                   gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
                                                    "x": gym.spaces.Discrete(2)}),
                                   gym.spaces.Box(-1.0, 1.0, (8, 8, 3))])
def test_unsupported_observation_space_names_it(space):
    with pytest.raises(UnsupportedSpaceError, match="Text|Sequence|image"):
        make_encoder(space)


@pytest.mark.parametrize("env", ["FrozenLake-v1", "Blackjack-v1"])
def test_toy_text_envs_resume_bit_identically_and_evaluate(env, tmp_path, monkeypatch):
    """Discrete and Tuple observations: a run stopped after update 2 and resumed ends with the same
    bits as one that ran straight through; rlkit eval's loader acts on single and listed observations."""
    cfg = rlkit.TrainConfig(env=env, total_steps=512, num_envs=2, num_steps=64, num_minibatches=2, update_epochs=2,
                            norm_obs=True, checkpoint_every=128, logdir=str(tmp_path), run_name="a", eval_episodes=3,
                            progress=False)
    whole = rlkit.train(cfg)
    with monkeypatch.context() as m:
        _stop_after_update(m, 2)
        with pytest.raises(Interrupted):
            rlkit.train(cfg.replace(run_name="b"))
    resumed = resume(str(tmp_path / "b"))
    assert_same_bits(final_tensors(whole.run_dir), final_tensors(resumed.run_dir))
    assert resumed.eval_return_mean == whole.eval_return_mean
    agent = rlkit.load_agent(whole.run_dir)
    obs, _ = gym.make(env).reset(seed=0)
    assert gym.make(env).action_space.contains(agent.act(obs))
    assert len(agent.act([obs, obs])) == 2
    with pytest.raises(ObservationError):
        agent.act("not an observation")  # one-line ObservationError (an RlkitError)


def test_a_box_observation_of_another_shape_is_refused_even_with_the_right_size():
    enc = make_encoder(gym.spaces.Box(-1, 1, (4,)))
    assert enc.batch(np.zeros((3, 4)), 3).shape == (3, 4)
    with pytest.raises(ValueError, match="shape"):
        enc.batch(np.zeros((3, 2, 2)), 3)
