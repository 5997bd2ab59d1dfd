"""A population's normalizations stepped together give each member the bits of its own normalizer
stepped alone (plain vs batched, on this machine)."""

import numpy as np
import pytest

from rlkit.core.normalization import ObsNormalizer, RewardScaler, StackedStats, normalize_stacked, scale_stacked


def _states(objs):
    return [o.state_dict() for o in objs]


@pytest.mark.parametrize("n, shape, scaled", [(1, (11,), None), (4, (3,), None), (8, (2, 3), None),
                                              (4, (5,), np.array([1, 0, 1, 1, 0], bool))])
def test_observations_normalized_together_are_each_members_own(n, shape, scaled):
    rng = np.random.default_rng(0)
    k = 5
    flat = int(np.prod(shape))
    alone = [ObsNormalizer((flat,), True, scaled=scaled) for _ in range(k)]
    together = [ObsNormalizer((flat,), True, scaled=scaled) for _ in range(k)]
    for step in range(30):
        obs = (rng.standard_normal((k, n, flat)) * (1 + step) + step).astype(np.float32)
        if step == 7:
            obs[2] *= 1e4  # one member's outlier is clipped in its rows only
        mine = np.stack([a(obs[i], update=True) for i, a in enumerate(alone)])
        ours = normalize_stacked(together, obs)
        assert ours.dtype == np.float32 and np.array_equal(mine, ours)
    assert _states(alone) == _states(together)
    assert not np.array_equal(alone[0].rms.mean, alone[1].rms.mean)  # the members' statistics are their own
    extra = rng.standard_normal((3, flat)).astype(np.float32)
    assert all(np.array_equal(a(extra, update=False), b(extra, update=False)) for a, b in zip(alone, together))


@pytest.mark.parametrize("n", [1, 4])
def test_rewards_scaled_together_are_each_members_own(n):
    rng = np.random.default_rng(1)
    k = 4
    alone = [RewardScaler(n, 0.99, True) for _ in range(k)]
    together = [RewardScaler(n, 0.99, True) for _ in range(k)]
    for step in range(50):
        rewards = rng.standard_normal((k, n)) * (1 + np.arange(k))[:, None]
        dones = rng.random((k, n)) < 0.1
        mine = np.stack([a(rewards[i], dones[i], update=True) for i, a in enumerate(alone)])
        ours = scale_stacked(together, rewards, dones)
        assert np.array_equal(mine, ours)
    assert _states(alone) == _states(together)


def test_disabled_normalizations_pass_values_through():
    obs = np.arange(12, dtype=np.float64).reshape(2, 3, 2)
    out = normalize_stacked([ObsNormalizer((2,), False), ObsNormalizer((2,), False)], obs)
    assert out.dtype == np.float32 and np.array_equal(out, obs)
    rewards = np.ones((2, 3))
    assert np.array_equal(scale_stacked([RewardScaler(3, 0.9, False)] * 2, rewards, rewards > 0), rewards)


def test_statistics_kept_stacked_between_steps_stay_each_members_own():
    """``StackedStats`` keeps the members' statistics as rows between steps (nothing stacked again);
    a member updated alone, loaded from a state, or left out in between is stacked again, and every
    member's numbers stay those of its normalizer and scaler stepped alone."""
    rng = np.random.default_rng(2)
    k, n, d = 4, 2, 3
    alone = [(ObsNormalizer((d,), True), RewardScaler(n, 0.99, True)) for _ in range(k)]
    together = [(ObsNormalizer((d,), True), RewardScaler(n, 0.99, True)) for _ in range(k)]
    obs_rows, rew_rows = StackedStats(), StackedStats()
    for step in range(40):
        obs = (rng.standard_normal((k, n, d)) * (1 + step)).astype(np.float32)
        rewards, dones = rng.standard_normal((k, n)), rng.random((k, n)) < 0.2
        live = [1, 3] if 20 <= step < 25 else list(range(k))  # two members out for a while
        if step == 15:  # member 0's normalizers reloaded from its (equal) states
            together[0][0].load_state_dict(alone[0][0].state_dict())
            together[0][1].load_state_dict(alone[0][1].state_dict())
        for i in live:
            mine_obs, mine_rew = alone[i][0](obs[i], update=True), alone[i][1](rewards[i], dones[i], update=True)
            if step in (10, 30) and i == 2:  # member 2 steps alone, by itself
                assert np.array_equal(together[i][0](obs[i], update=True), mine_obs)
                assert np.array_equal(together[i][1](rewards[i], dones[i], update=True), mine_rew)
        if step in (10, 30):
            live = [i for i in live if i != 2]
        before = obs_rows.mean
        ours_obs = normalize_stacked([together[i][0] for i in live], obs[live], obs_rows)
        ours_rew = scale_stacked([together[i][1] for i in live], rewards[live], dones[live], rew_rows)
        if step in (5, 6, 7):  # steady: the same rows, updated in place
            assert obs_rows.mean is before
        for j, i in enumerate(live):
            assert np.array_equal(ours_obs[j], alone[i][0](obs[i], update=False)), (step, i)
            assert np.array_equal(ours_rew[j], alone[i][1](rewards[i], dones[i], update=False))
    for a, b in zip(alone, together):
        assert _states(a) == _states(b)
