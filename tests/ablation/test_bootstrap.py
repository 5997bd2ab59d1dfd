"""The report's vectorized stratified bootstrap gives rliable's intervals: the same resamples in
the same order, the same statistics."""

import numpy as np
import pytest
from rliable import library as rly
from rliable import metrics

from rlkit.ablation import bootstrap, stats


def rliable_intervals(scores, func, reps, seed=0):
    """``rliable.library.get_interval_estimates`` as the report called it, seeded the same way."""
    with bootstrap.seeded_global_numpy(seed):
        return rly.get_interval_estimates(scores, func, reps=reps, random_state=np.random.RandomState(seed))


def same(ours, theirs):
    (p1, c1), (p2, c2) = ours, theirs
    assert set(p1) == set(p2) == set(c1) == set(c2)
    for key in p1:
        np.testing.assert_allclose(np.ravel(p1[key]), np.ravel(p2[key]), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.asarray(c1[key]).reshape(2, -1), np.asarray(c2[key]).reshape(2, -1),
                                   rtol=1e-12, atol=1e-12)


@pytest.fixture
def matrices():
    rng = np.random.default_rng(7)
    return {"a": rng.normal(size=(10, 3)), "b": rng.normal(0.3, 1.0, size=(10, 3)),
            "c": np.round(rng.normal(size=(6, 3)), 1)}  # fewer runs, and ties


def test_the_aggregate_metrics_are_rliables(matrices):
    def theirs(x):
        return np.array([metrics.aggregate_iqm(x), metrics.aggregate_median(x), metrics.aggregate_mean(x),
                         metrics.aggregate_optimality_gap(x)])
    same(bootstrap.intervals(matrices, bootstrap.aggregates, 500, 0), rliable_intervals(matrices, theirs, 500))


def test_one_envs_iqm_is_rliables(matrices):
    one = {"a": matrices["a"][:, :1], "c": matrices["c"][:, 1:2]}
    same(bootstrap.intervals(one, lambda x: bootstrap.iqm(x)[:, None], 700, 3),
         rliable_intervals(one, lambda x: np.array([metrics.aggregate_iqm(x)]), 700, 3))


@pytest.mark.parametrize("other", ["b", "c"])  # equal run counts (one draw for both), and unequal
def test_the_probability_of_improvement_is_rliables(matrices, other):
    pairs = {f"{other},a": (matrices[other], matrices["a"]), "a,a": (matrices["a"], matrices["a"])}
    same(bootstrap.intervals(pairs, bootstrap.improvement_probability, 400, 0),
         rliable_intervals(pairs, metrics.probability_of_improvement, 400))


def test_the_performance_profiles_are_rliables(matrices):
    taus = np.linspace(-2, 2, 9)
    ours = stats.profiles(matrices, 300)
    with bootstrap.seeded_global_numpy(0):
        points, bands = rly.create_performance_profile(matrices, ours.taus, reps=300)
    same((ours.points, ours.bands), (points, bands))
    same(bootstrap.intervals(matrices, bootstrap.profile(taus), 200, 5),
         rliable_intervals(matrices, lambda x: np.array([np.mean(x > t) for t in taus]), 200, 5))


def test_a_report_resamples_20000_times_unless_told(tmp_path, monkeypatch):
    """``rlkit report`` and ``write_report``: every interval from at least 20,000 resamples by
    default; ``--reps`` sets it."""
    from rlkit.cli import main
    from tests.ablation.test_hostile_sweeps import fake_sweep

    finals = {(v, "CartPole-v1", s): [100.0 * s + (50 if v == "b" else 0)] for v in "ab" for s in (1, 2, 3)}
    out = fake_sweep(tmp_path, finals)
    seen, intervals = [], bootstrap.intervals
    monkeypatch.setattr(bootstrap, "intervals", lambda *a, **k: seen.append(a[2]) or intervals(*a, **k))
    assert main(["report", str(out), "--baseline", "a"]) == 0
    assert seen and min(seen) >= 20_000
    seen.clear()
    assert main(["report", str(out), "--baseline", "a", "--reps", "300"]) == 0
    assert set(seen) == {300}
