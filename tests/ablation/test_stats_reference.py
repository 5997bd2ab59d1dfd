"""The report's probability of improvement and aggregate intervals against rliable's own functions,
a hand Mann-Whitney count and a hand stratified bootstrap, on a sweep with ties, three envs and
unequal seed counts (rliable's results are computed here, on this machine, not recorded)."""

import numpy as np
import pandas as pd
import pytest
from rliable import library as rly
from rliable import metrics
from scipy.stats import mannwhitneyu, trim_mean

from rlkit.ablation import stats

ENVS = ("A", "B", "C")
REFERENCES = {"A": {"random": 0.0, "reference": 10.0}, "B": {"random": -5.0, "reference": 5.0},
              "C": {"random": 0.0, "reference": 4.0}}


@pytest.fixture(scope="module")
def sweep():
    """Final scores of a new variant (7 seeds, an eighth that finished on one env only) and a
    baseline (5 seeds) on three envs; integer returns from a narrow range, so ties within and
    across variants are many."""
    rng = np.random.default_rng(7)
    rows = []
    for variant, seeds, shift in (("new", range(1, 8), 1), ("base", range(1, 6), 0)):
        for env in ENVS:
            for seed in seeds:
                rows.append({"variant": variant, "env": env, "seed": seed, "step": 100,
                             "score": float(rng.integers(0, 4) + shift * rng.integers(0, 2))})
    rows.append({"variant": "new", "env": "A", "seed": 8, "step": 100, "score": 9.0})  # not on B, C: left out
    scores = stats.normalize(pd.DataFrame(rows), REFERENCES)
    matrices, envs = stats.score_matrices(scores, ["new", "base"])
    return scores, matrices, envs


def _per_env(scores, variant, env):
    return scores[(scores.variant == variant) & (scores.env == env) & (scores.seed <= 7)]["score"].to_numpy()


def _hand_probability(x, y):
    """P(X > Y) + P(X = Y) / 2 over every pair of runs, averaged over envs: ``x [..., n, envs]``,
    ``y [..., m, envs]`` -> ``[...]``."""
    pairs = x[..., :, None, :] - y[..., None, :, :]  # [..., n, m, envs]
    return ((pairs > 0).mean((-3, -2)) + 0.5 * (pairs == 0).mean((-3, -2))).mean(-1)


def _resample(m, rng, reps):
    """``reps`` stratified resamples ``[reps, runs, envs]`` of ``m [runs, envs]``: each env's runs
    drawn with replacement from its own."""
    return np.take_along_axis(np.broadcast_to(m, (reps, *m.shape)), rng.integers(0, len(m), (reps, *m.shape)), axis=1)


def test_the_case_has_ties_unequal_seeds_and_a_run_left_out(sweep):
    scores, matrices, envs = sweep
    assert envs == list(ENVS) and matrices["new"].shape == (7, 3) and matrices["base"].shape == (5, 3)
    for env in range(3):
        both = np.concatenate([matrices["new"][:, env], matrices["base"][:, env]])
        assert len(np.unique(both)) < len(both) - 3  # many ties
        assert set(matrices["new"][:, env]) & set(matrices["base"][:, env])  # ties across the two variants


def test_probability_of_improvement_is_the_mann_whitney_count_and_rliables(sweep):
    scores, matrices, _ = sweep
    got = stats.improvement(matrices, "base", reps=20)
    assert set(got) == {"new"}
    point = got["new"][0]
    # By hand, from the score table (not the matrices): every pair of runs per env, a tie counts one half.
    hand = []
    for env in ENVS:
        x, y = _per_env(scores, "new", env), _per_env(scores, "base", env)
        assert len(x) == 7 and len(y) == 5
        hand.append(sum(float(a > b) + 0.5 * float(a == b) for a in x for b in y) / (len(x) * len(y)))
        u = mannwhitneyu(x, y, alternative="greater").statistic  # scipy's U counts ties as one half too
        assert u / (len(x) * len(y)) == pytest.approx(hand[-1], abs=1e-12)
    assert 0.55 < np.mean(hand) < 0.95  # not a trivial 0, 1/2 or 1
    assert point == pytest.approx(np.mean(hand), abs=1e-12)
    assert point == pytest.approx(metrics.probability_of_improvement(matrices["new"], matrices["base"]), abs=1e-12)
    reverse = stats.improvement(matrices, "new", reps=20)["base"][0]
    assert reverse == pytest.approx(1 - point, abs=1e-12)


def test_improvement_interval_is_rliables_stratified_bootstrap(sweep):
    _, matrices, _ = sweep
    reps, seed = 300, 3
    point, low, high = stats.improvement(matrices, "base", reps=reps, seed=seed)["new"]
    np.random.seed(seed)  # rliable resamples from NumPy's global RNG; the report seeds it so
    ref_points, ref_cis = rly.get_interval_estimates({"p": (matrices["new"], matrices["base"])},
                                                     metrics.probability_of_improvement, reps=reps,
                                                     random_state=np.random.RandomState(seed))
    assert [point, low, high] == [float(np.ravel(ref_points["p"])[0]), *map(float, np.ravel(ref_cis["p"]))]
    # A hand stratified bootstrap: each variant's runs resampled with replacement within each env,
    # independently; the 2.5th and 97.5th percentiles. Its own generator: equal within resampling error.
    rng = np.random.default_rng(0)
    x, y = matrices["new"], matrices["base"]
    boot = _hand_probability(_resample(x, rng, 20_000), _resample(y, rng, 20_000))
    hand_low, hand_high = np.percentile(boot, [2.5, 97.5])
    assert low < point < high and high - low > 0.1
    assert abs(low - hand_low) < 0.04 and abs(high - hand_high) < 0.04


def test_interval_estimates_are_rliables_and_the_points_are_the_formulas(sweep):
    _, matrices, _ = sweep
    reps, seed = 500, 5
    got = stats.interval_estimates(matrices, reps, seed)
    assert set(got) == {"new", "base"}

    def aggregate(x):
        return np.array([metrics.aggregate_iqm(x), metrics.aggregate_median(x), metrics.aggregate_mean(x),
                         metrics.aggregate_optimality_gap(x)])

    np.random.seed(seed)
    points, cis = rly.get_interval_estimates(matrices, aggregate, reps=reps, random_state=np.random.RandomState(seed))
    for v, m in matrices.items():
        flat = m.ravel()
        by_hand = {"iqm": trim_mean(flat, 0.25), "median": np.median(m.mean(axis=0)), "mean": flat.mean(),
                   "optimality_gap": np.mean(1 - np.minimum(flat, 1))}
        for i, name in enumerate(("iqm", "median", "mean", "optimality_gap")):
            # The same resamples and formulas; NumPy's reductions may round the last bit differently
            # on another CPU or memory order, so rliable's figures are matched to 1e-12.
            np.testing.assert_allclose(got[v][name], [points[v][i], cis[v][0, i], cis[v][1, i]], rtol=1e-12,
                                       atol=1e-12, err_msg=f"{v} {name}")
            assert got[v][name][0] == pytest.approx(by_hand[name], abs=1e-12), (v, name)
            assert got[v][name][1] <= got[v][name][0] <= got[v][name][2], (v, name)
    assert got["new"]["mean"][2] - got["new"]["mean"][1] > 0.05  # intervals of real width
    # The IQM's interval against a hand stratified bootstrap (runs resampled within each env).
    rng = np.random.default_rng(1)
    m = matrices["base"]
    boot = trim_mean(_resample(m, rng, 20_000).reshape(20_000, -1), 0.25, axis=1)
    hand_low, hand_high = np.percentile(boot, [2.5, 97.5])
    assert abs(got["base"]["iqm"][1] - hand_low) < 0.05 and abs(got["base"]["iqm"][2] - hand_high) < 0.05
