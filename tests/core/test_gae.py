import itertools

import numpy as np
import pytest
import torch

from rlkit import compute_gae
from rlkit.core.gae import _gae_torch


def plain_loop(rewards, values, next_values, terminated, done, gamma, lam):
    """Scalar reference: one env at a time, straight from the GAE definition."""
    T, N = rewards.shape
    adv = np.zeros((T, N))
    for n in range(N):
        running = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminated[t, n] else gamma * next_values[t, n]
            delta = rewards[t, n] + bootstrap - values[t, n]
            running = delta + (0.0 if done[t, n] else gamma * lam * running)
            adv[t, n] = running
    return adv


def test_hand_computed_termination_and_timeout_mid_rollout():
    # One env, 4 steps: episode A terminates at t=1, episode B is truncated (time-out) at t=2,
    # episode C runs past the rollout end (bootstrap from next_values[3]).
    g, lam = 0.9, 0.5
    r = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    v = torch.tensor([[0.5], [1.0], [1.5], [2.0]])
    nv = torch.tensor([[1.0], [99.0], [10.0], [3.0]])  # nv[1] unused (terminal); nv[2] = V(final obs)
    term = torch.tensor([[False], [True], [False], [False]])
    trunc = torch.tensor([[False], [False], [True], [False]])
    adv, ret = compute_gae(r, v, nv, term, term | trunc, g, lam)
    d3 = 4 + 0.9 * 3 - 2.0          # 4.7
    d2 = 3 + 0.9 * 10 - 1.5         # 10.5, bootstraps from V(final obs), recursion stops
    d1 = 2 + 0 - 1.0                # 1.0, termination: no bootstrap
    d0 = 1 + 0.9 * 1.0 - 0.5        # 1.4
    expected = [d0 + 0.45 * d1, d1, d2, d3]
    assert adv[:, 0].tolist() == pytest.approx(expected)
    assert ret[:, 0].tolist() == pytest.approx([e + x for e, x in zip(expected, [0.5, 1.0, 1.5, 2.0])])


def test_termination_never_bootstraps_even_with_large_next_value():
    r = torch.zeros(2, 1)
    v = torch.zeros(2, 1)
    term = torch.tensor([[True], [False]])
    a1, _ = compute_gae(r, v, torch.full((2, 1), 1e6), term, term, 0.99, 0.95)
    assert a1[0, 0] == 0.0


@pytest.mark.parametrize("gamma,lam", list(itertools.product([0.0, 0.5, 0.99, 1.0], [0.0, 0.9, 1.0])))
@pytest.mark.parametrize("shape", [(1, 1), (7, 3), (64, 8), (2048, 1), (33, 17), (16, 64)])
def test_matches_plain_loop_over_grid(gamma, lam, shape):
    gen = np.random.default_rng(hash((gamma, lam, shape)) % 2**32)
    r, v, nv = (gen.normal(size=shape).astype(np.float32) for _ in range(3))
    term = gen.random(shape) < 0.1
    done = term | (gen.random(shape) < 0.1)
    expected = plain_loop(r, v, nv, term, done, gamma, lam)
    t = [torch.from_numpy(x) for x in (r, v, nv, term, done)]
    adv, ret = compute_gae(*t, gamma, lam)
    np.testing.assert_allclose(adv.numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret.numpy(), expected + v, rtol=1e-5, atol=1e-5)
    # The torch path (used on CUDA) agrees with the numpy path.
    np.testing.assert_allclose(_gae_torch(*t, gamma, lam).numpy(), adv.numpy(), rtol=1e-6, atol=1e-6)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="one \\[T, N\\] shape"):
        compute_gae(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 1), torch.zeros(3, 2, dtype=torch.bool),
                    torch.zeros(3, 2, dtype=torch.bool), 0.99, 0.95)
