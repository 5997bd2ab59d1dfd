"""The report's exact rank tests (Mann–Whitney per env, stratified across envs) against hand counts,
brute-force enumeration and scipy; and what a report of few runs says about its intervals."""

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from rlkit.ablation import rank_tests
from rlkit.ablation.rank_tests import EXACT, NORMAL, MIN_SEEDS_FOR_INTERVALS, mann_whitney, stratified
from rlkit.ablation.report import write_report
from tests.ablation.test_hostile_sweeps import fake_sweep


def pair_count(x, y):
    """U by counting pairs: 1 for x_i > y_j, 1/2 for a tie."""
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)


def enumerate_u(x, y):
    """U of every split of the pooled runs into n and m (the permutation distribution, by brute force)."""
    pooled, n = list(x) + list(y), len(x)
    out = []
    for chosen in itertools.combinations(range(len(pooled)), n):
        rest = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        out.append(pair_count([pooled[i] for i in chosen], rest))
    return np.array(out)


def brute(x, y):
    """(p two-sided, p greater) from the brute-force permutation distribution."""
    us, u = enumerate_u(x, y), pair_count(x, y)
    greater, less = np.mean(us >= u - 1e-9), np.mean(us <= u + 1e-9)
    return min(1.0, 2 * min(greater, less)), greater


def test_three_runs_against_three_that_do_not_overlap_by_hand():
    """U = 9 of 9; 1 of the C(6, 3) = 20 splits is as extreme: one-sided p 0.05, two-sided 0.1,
    and 0.1 is the smallest two-sided p-value 3 runs against 3 can ever give."""
    t = mann_whitney([3.0, 4.0, 5.0], [0.0, 1.0, 2.0])
    assert (t.statistic, t.p_improvement, t.method) == (9.0, 1.0, EXACT)
    assert t.p_greater == pytest.approx(1 / 20) and t.p_value == pytest.approx(0.1)
    assert t.min_p_value == pytest.approx(0.1)


def test_ties_by_hand():
    """x = (1, 2, 2), y = (2, 3): mid-ranks 1, 3, 3, 3, 5; the 10 splits give U = 1 (3 ways), 3 (4
    ways), 5 (3 ways); observed U = 0 + 0.5 + 0.5 = 1: P(U <= 1) = 3/10, two-sided 0.6."""
    t = mann_whitney([1.0, 2.0, 2.0], [2.0, 3.0])
    assert t.statistic == 1.0 and t.p_improvement == pytest.approx(1 / 6)
    assert t.p_greater == pytest.approx(1.0) and t.p_value == pytest.approx(0.6)
    assert sorted(enumerate_u([1.0, 2.0, 2.0], [2.0, 3.0])) == [1, 1, 1, 3, 3, 3, 3, 5, 5, 5]


@pytest.mark.parametrize("n,m", [(1, 1), (2, 3), (3, 3), (4, 6), (7, 5), (10, 10)])
def test_without_ties_it_is_scipys_exact_test(n, m):
    rng = np.random.default_rng(n * 100 + m)
    x, y = rng.normal(0.5, 1, n), rng.normal(0, 1, m)
    t = mann_whitney(x, y)
    assert t.statistic == sps.mannwhitneyu(x, y).statistic
    assert t.p_value == pytest.approx(sps.mannwhitneyu(x, y, method="exact").pvalue, rel=1e-9)
    assert t.p_greater == pytest.approx(sps.mannwhitneyu(x, y, method="exact", alternative="greater").pvalue,
                                        rel=1e-9)
    assert t.min_p_value == pytest.approx(min(1.0, 2 / math.comb(n + m, n)))


@pytest.mark.parametrize("seed", range(6))
def test_with_ties_it_is_the_exact_permutation_distribution(seed):
    """Against brute-force enumeration and scipy's exact permutation test of the same U."""
    rng = np.random.default_rng(seed)
    n, m = rng.integers(2, 6), rng.integers(2, 6)
    x, y = rng.integers(0, 4, n).astype(float), rng.integers(0, 4, m).astype(float)
    t = mann_whitney(x, y)
    assert t.statistic == pair_count(x, y)
    p, greater = brute(x, y)
    assert (t.p_value, t.p_greater) == (pytest.approx(p), pytest.approx(greater))

    def u(a, b, axis):
        return sps.mannwhitneyu(a, b, axis=axis).statistic

    ref = sps.permutation_test((x, y), u, permutation_type="independent", n_resamples=np.inf, vectorized=True,
                               alternative="greater")
    assert t.p_greater == pytest.approx(ref.pvalue)


def test_past_the_exact_limit_it_is_scipys_asymptotic_test_and_says_so():
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 30, 60).astype(float), rng.integers(2, 32, 50).astype(float)  # 110 runs, ties
    t = mann_whitney(x, y)
    assert t.method == NORMAL
    for alternative, value in (("two-sided", t.p_value), ("greater", t.p_greater)):
        ref = sps.mannwhitneyu(x, y, method="asymptotic", use_continuity=True, alternative=alternative).pvalue
        assert value == pytest.approx(ref, rel=1e-9)


def test_stratified_by_hand():
    """A: (2, 3) vs 1, U = 2; B: (1, 3) vs 2, U = 1. Each env's U is 0, 1 or 2 with 1/3 each; the sum
    is 3 or more in 3 of the 9 equally likely within-env splits: one-sided p 1/3, two-sided 2/3."""
    t = stratified([([2.0, 3.0], [1.0]), ([1.0, 3.0], [2.0])])
    assert t.statistic == pytest.approx(0.75) and t.method == EXACT
    assert t.p_greater == pytest.approx(1 / 3) and t.p_value == pytest.approx(2 / 3)
    assert t.min_p_value == pytest.approx(2 / 9)


def brute_stratified(pairs):
    """The mean per-env U / (n m) over every combination of within-env splits."""
    per_env = [enumerate_u(x, y) / (len(x) * len(y)) for x, y in pairs]
    observed = np.mean([pair_count(x, y) / (len(x) * len(y)) for x, y in pairs])
    means = np.array([np.mean(c) for c in itertools.product(*per_env)])
    greater, less = np.mean(means >= observed - 1e-9), np.mean(means <= observed + 1e-9)
    return min(1.0, 2 * min(greater, less)), greater


@pytest.mark.parametrize("seed", range(5))
def test_stratified_is_the_within_env_permutation_distribution(seed):
    """Unequal run counts across envs (a lattice of several denominators) and ties."""
    rng = np.random.default_rng(seed)
    pairs = [(rng.integers(0, 5, rng.integers(1, 5)).astype(float),
              rng.integers(0, 5, rng.integers(1, 4)).astype(float)) for _ in range(3)]
    t = stratified(pairs)
    p, greater = brute_stratified(pairs)
    assert (t.p_value, t.p_greater) == (pytest.approx(p), pytest.approx(greater))


def test_one_env_stratified_is_the_env_test():
    x, y = [5.0, 7.0, 7.0, 9.0], [1.0, 7.0, 3.0]
    one, env = stratified([(x, y)]), mann_whitney(x, y)
    assert (one.p_value, one.p_greater, one.min_p_value) == pytest.approx((env.p_value, env.p_greater,
                                                                           env.min_p_value))


def test_the_threshold_is_five_runs():
    assert MIN_SEEDS_FOR_INTERVALS == 5


def report_of(tmp_path, seeds, envs=("CartPole-v1",)):
    """A report of variant "outer" against "ppo" whose runs never overlap: outer's seeds all 500,
    ppo's 100 + seed."""
    finals = {("outer", e, s): [500.0] for e in envs for s in range(1, seeds + 1)}
    finals.update({("ppo", e, s): [100.0 + s] for e in envs for s in range(1, seeds + 1)})
    out = fake_sweep(tmp_path, finals, envs=envs)
    paths = write_report(str(out), baseline="ppo", reps=200)
    return Path(paths["report"]).read_text(), json.loads(Path(paths["summary"]).read_text())


def test_a_three_seed_report_says_its_intervals_are_not_reliable_and_claims_nothing(tmp_path):
    text, summary = report_of(tmp_path, 3, envs=("CartPole-v1", "Acrobot-v1"))
    assert "with confidence" not in text
    assert "the intervals are not reliable" in text and "3 run(s) per variant" in text
    assert summary["intervals"]["intervals_reliable"] is False and summary["intervals"]["fewest_runs"] == 3
    assert summary["improvement"]["outer"][1:] == [1.0, 1.0]  # the bootstrap collapses ...
    assert "1.000 [1.000, 1.000] (degenerate)" in text and "is not a sign of certainty" in text  # ... named so
    assert "500.0 [500.0, 500.0] (degenerate)" in text
    envs = {r["env"]: r for r in summary["rank_tests"]["per_env"]}
    assert envs["CartPole-v1"]["p_value"] == pytest.approx(0.1) and envs["CartPole-v1"]["min_p_value"] == \
        pytest.approx(0.1)
    combined = summary["rank_tests"]["combined"]["outer"]
    assert combined["envs"] == ["Acrobot-v1", "CartPole-v1"] and combined["p_value"] == pytest.approx(2 / 400)
    assert "| CartPole-v1 | outer | 3 (3) | 9.0 | 1.000 | 0.100 | 0.100 |" in text
    assert "| outer | 2 | 1.000 | 0.005 | 0.005 |" in text
    assert "no outcome of these runs" in text


def test_a_ten_seed_report_keeps_its_reading_of_the_intervals(tmp_path):
    text, summary = report_of(tmp_path, 10)
    assert summary["intervals"]["intervals_reliable"] is True and "not reliable" not in text
    assert "with confidence when its P(> baseline) interval lies above 0.5" in text
    env = summary["rank_tests"]["per_env"][0]
    assert env["p_value"] == pytest.approx(2 / math.comb(20, 10)) and env["method"] == rank_tests.EXACT
    assert "no outcome of these runs" not in text


def test_a_report_without_a_degenerate_interval_does_not_explain_one(tmp_path):
    finals = {(v, "CartPole-v1", s): [100.0 * s + (50.0 if v == "outer" else 0.0)] for v in ("outer", "ppo")
              for s in range(1, 6)}
    text = Path(write_report(str(fake_sweep(tmp_path, finals)), baseline="ppo", reps=200)["report"]).read_text()
    assert "(degenerate)" not in text and "degenerate*" not in text


def test_an_aggregate_of_fewer_seeds_than_its_envs_hold_is_not_reliable_either(tmp_path):
    """Five runs of each variant on each env, but outer's seeds differ between the envs: only its
    seeds 3-5 finished on both, so its aggregate rests on three."""
    envs = ("CartPole-v1", "Acrobot-v1")
    finals = {("ppo", e, s): [100.0 + s] for e in envs for s in range(1, 6)}
    finals.update({("outer", "CartPole-v1", s): [400.0 + s] for s in range(1, 6)})
    finals.update({("outer", "Acrobot-v1", s): [400.0 + s] for s in range(3, 8)})
    paths = write_report(str(fake_sweep(tmp_path, finals, envs=envs)), baseline="ppo", reps=200)
    summary, text = json.loads(Path(paths["summary"]).read_text()), Path(paths["report"]).read_text()
    assert summary["seeds_aggregated"]["outer"] == 3
    assert summary["intervals"]["intervals_reliable"] is False
    assert summary["intervals"]["below_min_runs"] == [{"variant": "outer", "env": "all", "runs": 3}]
    assert "with confidence" not in text and "the intervals are not reliable" in text


def test_few_runs_on_an_env_the_aggregate_leaves_out_do_not_mark_the_aggregate(tmp_path):
    """Five seeds of each variant on CartPole; on Acrobot, which the aggregate leaves out (ppo has no
    run there), outer has two: the per-env intervals are flagged, the aggregate's reading is kept."""
    finals = {(v, "CartPole-v1", s): [100.0 * s + (50.0 if v == "outer" else 0.0)] for v in ("outer", "ppo")
              for s in range(1, 6)}
    finals.update({("outer", "Acrobot-v1", s): [-100.0 + s] for s in (1, 2)})
    paths = write_report(str(fake_sweep(tmp_path, finals, envs=("CartPole-v1", "Acrobot-v1"))), baseline="ppo", reps=200)
    summary, text = json.loads(Path(paths["summary"]).read_text()), Path(paths["report"]).read_text()
    assert summary["envs_aggregated"] == ["CartPole-v1"] and "Acrobot-v1" in summary["envs_left_out"]
    assert summary["intervals"]["below_min_runs"] == [{"variant": "outer", "env": "Acrobot-v1", "runs": 2}]
    assert text.startswith("# Sweep report") and "**Few runs: the intervals are not reliable.**" in text
    assert "with confidence when its P(> baseline) interval lies above 0.5" in text
    assert "computed from fewer than" not in text
