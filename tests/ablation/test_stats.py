"""The report's statistics against rliable on fixed inputs."""

import numpy as np
import pandas as pd
import pytest
from rliable import library as rly
from rliable import metrics

from rlkit.ablation import stats


def test_iqm_curve_matches_rliable_iqm_at_every_point_and_its_interval():
    rng = np.random.default_rng(3)
    curves = rng.normal(size=(10, 5)) * np.arange(1, 6)
    point, low, high = stats.iqm_curve(curves, reps=4000)
    for t in range(5):
        x = curves[:, t:t + 1]
        assert np.isclose(point[t], metrics.aggregate_iqm(x))
        _, ci = rly.get_interval_estimates({"a": x}, lambda s: np.array([metrics.aggregate_iqm(s)]), reps=4000,
                                           random_state=np.random.RandomState(0))
        width = ci["a"][1, 0] - ci["a"][0, 0]
        assert abs(low[t] - ci["a"][0, 0]) < 0.15 * width and abs(high[t] - ci["a"][1, 0]) < 0.15 * width


@pytest.mark.parametrize("runs", [2, 3, 7, 10])
def test_iqm_curve_bands_are_the_percentiles_of_each_resamples_iqm(runs):
    """Each resample's IQM at every point is scipy's 25% trimmed mean of its runs there."""
    from scipy.stats import trim_mean

    curves = np.random.default_rng(runs).normal(size=(runs, 6))
    _, low, high = stats.iqm_curve(curves, reps=500, seed=4)
    idx = np.random.default_rng(4).integers(0, runs, size=(500, runs))
    expected = np.percentile(trim_mean(curves[idx], 0.25, axis=1), [2.5, 97.5], axis=0)
    np.testing.assert_allclose([low, high], expected, rtol=1e-12, atol=1e-12)


def test_scores_normalization_and_matrices():
    results = pd.DataFrame({"variant": ["a"] * 4 + ["b"] * 4, "env": ["E"] * 8, "seed": [1, 1, 2, 2] * 2,
                            "step": [1, 2] * 4, "eval_return_mean": [0, 10, 0, 20, 0, 30, 0, 40.0]})
    final = stats.final_scores(results)
    assert sorted(final.score) == [10, 20, 30, 40]
    auc = stats.auc_scores(results, grid_points=3)
    assert sorted(auc.score) == [5, 10, 15, 20]  # mean of a straight line from 0 to the final value
    norm = stats.normalize(final, {"E": {"random": 0.0, "reference": 40.0}})
    matrices, envs = stats.score_matrices(norm, ["a", "b"])
    assert envs == ["E"] and matrices["b"].ravel().tolist() == [0.75, 1.0]
    est = stats.interval_estimates(matrices, reps=200)
    assert est["b"]["mean"][0] == 0.875 and est["a"]["optimality_gap"][0] == 1 - 0.375
    assert stats.improvement(matrices, "a", reps=200)["b"][0] == 1.0


def test_intervals_are_the_same_every_time_and_leave_numpy_alone():
    """rliable resamples from NumPy's global RNG: the report seeds it for the call and restores it."""
    import numpy as np
    import pandas as pd

    from rlkit.ablation import stats

    rng = np.random.default_rng(0)
    scores = pd.DataFrame({"env": ["A"] * 10, "variant": ["v"] * 10, "seed": range(10), "score": rng.normal(size=10)})
    matrices = {"a": rng.normal(size=(10, 2)), "b": rng.normal(size=(10, 2))}
    np.random.seed(123)
    expected_next = np.random.random()
    np.random.seed(123)
    first = (stats.per_env_table(scores, 300).to_dict("records"), stats.interval_estimates(matrices, 300),
             stats.improvement(matrices, "a", 300))
    assert np.random.random() == expected_next  # the caller's global RNG stream is untouched
    second = (stats.per_env_table(scores, 300).to_dict("records"), stats.interval_estimates(matrices, 300),
              stats.improvement(matrices, "a", 300))
    assert first == second
