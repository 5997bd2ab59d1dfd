import json

import numpy as np
import pytest
import torch
from torch import nn

from rlkit.core.buffer import Batch, RolloutBuffer, iterate_minibatches
from rlkit.core.normalization import ObsNormalizer, RewardScaler, RunningMeanStd
from rlkit.core.optim import FlatParameters, make_adam


def test_running_mean_std_matches_numpy_over_batches():
    x = np.random.default_rng(0).normal(3.0, 2.0, size=(1000, 3))
    rms = RunningMeanStd((3,))
    for chunk in np.split(x, 10):
        rms.update(chunk)
    np.testing.assert_allclose(rms.mean, x.mean(0), rtol=1e-5)
    np.testing.assert_allclose(rms.var, x.var(0), rtol=1e-3)


def test_obs_normalizer_clips_and_freezes_and_round_trips():
    norm = ObsNormalizer((2,), enabled=True)
    data = np.random.default_rng(0).normal(5.0, 0.1, size=(500, 2)).astype(np.float32)
    norm(data, update=True)
    out = norm(np.array([[5.0, 1000.0]], np.float32), update=False)
    assert abs(out[0, 0]) < 1.0 and out[0, 1] == 10.0
    state = json.loads(json.dumps(norm.state_dict()))
    other = ObsNormalizer((2,), enabled=True)
    other.load_state_dict(state)
    probe = np.array([[5.05, 4.9]], np.float32)
    np.testing.assert_array_equal(other(probe, update=False), norm(probe, update=False))
    before = other.rms.count
    other(probe, update=False)
    assert other.rms.count == before  # frozen


def test_reward_scaler_resets_return_on_done():
    scaler = RewardScaler(2, gamma=0.9, enabled=True)
    scaler(np.array([1.0, 1.0]), np.array([False, True]), update=True)
    np.testing.assert_allclose(scaler.returns, [1.0, 0.0])
    scaler(np.array([1.0, 1.0]), np.array([False, False]), update=True)
    np.testing.assert_allclose(scaler.returns, [1.9, 1.0])


def test_buffer_next_values_use_final_obs_value_on_episode_end():
    buf = RolloutBuffer(3, 2, obs_dim=1, action_shape=(), action_dtype=torch.int64)
    for t in range(3):
        dones = np.array([t == 1, False])
        buf.add_action(t, np.zeros((2, 1)), np.zeros(2, np.int64), np.zeros(2), np.array([t, 10 + t], np.float32))
        buf.add_outcome(t, np.zeros(2), np.zeros(2), np.zeros(2, bool), dones)
    buf.set_final(1, np.array([0]), np.zeros((1, 1)), np.array([42.0]))
    nv = buf.next_values(np.array([7.0, 8.0]))
    np.testing.assert_array_equal(nv.numpy(), [[1, 11], [42, 12], [7, 8]])


@pytest.mark.parametrize("discrete", [True, False])
def test_minibatches_cover_the_batch_once_and_keep_rows_together(discrete):
    buf = RolloutBuffer(8, 4, obs_dim=2, action_shape=() if discrete else (3,),
                        action_dtype=torch.int64 if discrete else torch.float32)
    buf.obs[:] = torch.arange(32, dtype=torch.float32).reshape(8, 4, 1)
    buf.actions[:] = (torch.arange(32).reshape(8, 4) % 5) if discrete else torch.arange(32.0).reshape(8, 4, 1)
    buf.values[:] = torch.arange(32.0).reshape(8, 4)
    batch = buf.compute_batch(np.zeros(4), 0.99, 0.95)
    seen = []
    for mb in iterate_minibatches(batch, 4, torch.Generator().manual_seed(0)):
        assert mb.obs.shape == (8, 2)
        ids = mb.obs[:, 0].long()
        torch.testing.assert_close(mb.values, ids.float())
        if discrete:
            assert mb.actions.dtype == torch.int64
            torch.testing.assert_close(mb.actions, ids % 5)
        else:
            torch.testing.assert_close(mb.actions[:, 0], ids.float())
        seen += ids.tolist()
    assert sorted(seen) == list(range(32))


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))


def test_flat_parameters_match_per_tensor_autograd_clip_and_adam():
    ref, net = _net(), _net()
    flat = FlatParameters(list(net.parameters()))
    opt_ref = torch.optim.Adam(ref.parameters(), lr=1e-2, eps=1e-5)
    opt = make_adam(flat, lr=1e-2)
    x = torch.randn(16, 3)
    for _ in range(5):
        opt_ref.zero_grad()
        (ref(x).square().sum() * 10).backward()
        norm_ref = nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        opt_ref.step()
        flat.zero_grad()
        (net(x).square().sum() * 10).backward()
        norm = flat.clip_grad_norm_(0.5)
        opt.step()
        torch.testing.assert_close(norm, norm_ref)
    for a, b in zip(ref.parameters(), net.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # Parameters really are views into the flat vector.
    flat.data.zero_()
    assert all(float(p.detach().abs().sum()) == 0 for p in net.parameters())


def test_episode_accounting_over_rollouts_matches_a_step_by_step_count():
    from rlkit.gym.episodes import Episodes

    gen = np.random.default_rng(0)
    eps = Episodes(3)
    ret, length, expected = np.zeros(3), np.zeros(3, int), []
    for _ in range(4):  # episodes span rollout boundaries
        rewards = gen.integers(0, 5, (20, 3)).astype(np.float32)
        dones = gen.random((20, 3)) < 0.15
        for t in range(20):
            ret += rewards[t]
            length += 1
            for i in np.flatnonzero(dones[t]):
                expected.append((float(ret[i]), int(length[i])))
                ret[i], length[i] = 0.0, 0
        eps.rollout(rewards, dones)
    assert eps.pop() == expected and len(expected) > 10
    assert list(eps.recent) == [r for r, _ in expected]


def test_acting_without_values_samples_the_same_and_rollout_values_match_per_step():
    import gymnasium as gym

    from rlkit.gym.policies import MLPActorCritic

    torch.manual_seed(0)
    actor = MLPActorCritic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(3)).snapshot()
    obs = np.random.default_rng(0).normal(size=(6, 4, 4)).astype(np.float32)  # [T, N, obs_dim]
    buf = RolloutBuffer(6, 4, 4, (), torch.int64)
    per_step = []
    for t in range(6):
        full = actor.act(obs[t], np.random.default_rng(t))
        lean = actor.act(obs[t], np.random.default_rng(t), with_values=False)
        assert lean.values is None and (full.actions == lean.actions).all()
        np.testing.assert_allclose(full.log_probs, lean.log_probs, atol=1e-6)
        buf.add_action(t, obs[t], lean.actions, lean.log_probs, None)
        per_step.append(full.values)
    buf.set_values(actor.value)
    np.testing.assert_allclose(buf.np["values"], np.stack(per_step), atol=1e-6)


def test_contiguous_minibatches_keep_batch_order():
    n = 12
    batch = Batch(torch.arange(n, dtype=torch.float32)[:, None], torch.zeros(n, dtype=torch.int64), torch.zeros(n),
                  torch.zeros(n), torch.zeros(n), torch.zeros(n))
    chunks = [mb.obs[:, 0].tolist() for mb in iterate_minibatches(batch, 3, torch.Generator().manual_seed(0),
                                                                   shuffle=False)]
    assert chunks == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    shuffled = [mb.obs[:, 0].tolist() for mb in iterate_minibatches(batch, 3, torch.Generator().manual_seed(0))]
    assert sorted(sum(shuffled, [])) == list(range(n)) and shuffled != chunks
