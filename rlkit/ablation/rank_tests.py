"""Exact rank tests of a variant against the baseline, beside the report's bootstrap intervals.

Per env, the Mann–Whitney U test (Mann & Whitney 1947) of the variant's runs ``x [n]`` against
the baseline's ``y [m]``: ``U = #{(i, j): x_i > y_j} + ½ #{(i, j): x_i = y_j}``, and ``U / (n m)``
is the probability of improvement P(X > Y) that rliable estimates. Its p-value is exact: the
permutation distribution of U over all ``C(n + m, n)`` ways to split the pooled runs, conditional
on the observed ties (tied runs share their mid-rank). Without ties this is the classical exact
null distribution (``scipy.stats.mannwhitneyu(method="exact")``); with ties it is the exact
conditional (permutation) distribution, which scipy's ``exact`` method does not give. Above
:data:`EXACT_MAX_RUNS` pooled runs the normal approximation with tie and continuity corrections
is used instead (scipy's ``asymptotic``), and each result says which.

Across envs, the stratified test: the statistic is the mean over envs of each env's ``U / (n m)``
(the point estimate of the report's probability of improvement), and its null distribution is
that of independent permutations within each env (runs are exchangeable between the variant and
the baseline only on the same env): the convolution of the per-env exact distributions. With the
same run counts on every env this is the exact form of van Elteren's stratified Wilcoxon test
(van Elteren 1960, "On the combination of independent two-sample tests of Wilcoxon", Bull. Int.
Stat. Inst. 37, 351–361), whose statistic is then a linear function of the summed U; with unequal
counts each env's P(X > Y) weighs the same, as in rliable's probability of improvement.

Two-sided p-values double the smaller tail (as scipy does); the smallest two-sided p-value the run
counts allow, ``2 / C(n + m, n)`` per env (the product of those across envs), says how little a
few seeds can show: 3 runs against 3 never give a two-sided p below 0.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm, rankdata

EXACT_MAX_RUNS = 100
"""Pooled runs (variant + baseline, per env) up to which p-values are exact."""
MAX_LATTICE = 2_000_000
"""The largest support of the stratified statistic's exact distribution (else the normal approximation)."""
EXACT = "exact"
"""A p-value from the exact permutation distribution (ties as mid-ranks)."""
NORMAL = "normal approximation"
"""A p-value from the normal approximation with tie and continuity corrections."""


@dataclass(frozen=True)
class RankTest:
    """One Mann–Whitney test (one env) or one stratified test (across envs) of variant vs baseline."""

    statistic: float
    """Per env: U. Across envs: the mean over envs of U / (n m)."""
    p_improvement: float
    """The probability of improvement this estimates: U / (n m), or its mean over envs."""
    p_value: float
    """Two-sided p-value (no difference between variant and baseline)."""
    p_greater: float
    """One-sided p-value for the variant scoring higher than the baseline."""
    min_p_value: float
    """The smallest two-sided p-value these run counts allow (any data)."""
    method: str
    """:data:`EXACT` or :data:`NORMAL`."""

    def to_json(self) -> dict[str, float | str]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class _Null:
    """The null distribution of ``2U`` for one env: ``prob[k]`` is P(2U = k); plus U's observed
    value, mean and variance."""

    prob: np.ndarray | None
    """``[2 n m + 1]``, or None where the normal approximation is used."""
    u: float
    n: int
    m: int
    variance: float


def _null(x: np.ndarray, y: np.ndarray) -> _Null:
    n, m = len(x), len(y)
    if n == 0 or m == 0:
        raise ValueError("a rank test needs at least one run on each side")
    pooled = np.concatenate([x, y])
    ranks = rankdata(pooled)  # mid-ranks for ties
    u = float(ranks[:n].sum() - n * (n + 1) / 2)
    big = n + m
    _, ties = np.unique(pooled, return_counts=True)
    tie_term = float((ties ** 3 - ties).sum()) / (big * (big - 1)) if big > 1 else 0.0
    variance = n * m / 12 * ((big + 1) - tie_term)
    if big > EXACT_MAX_RUNS:
        return _Null(None, u, n, m, variance)
    halves = np.rint(2 * ranks).astype(np.int64)  # 2 x mid-rank: an integer
    top = int(np.sort(halves)[-n:].sum())
    counts = np.zeros((n + 1, top + 1))  # counts[k, s]: ways to pick k of the runs seen so far with 2 x rank sum s
    counts[0, 0] = 1.0
    for h in halves:
        counts[1:, h:] += counts[:-1, :top + 1 - h].copy()
    low = n * (n + 1)  # 2 x the smallest rank sum: 2U = 2R - n(n + 1)
    prob = counts[n, low:low + 2 * n * m + 1] / math.comb(big, n)
    return _Null(prob, u, n, m, variance)


def _tails(prob: np.ndarray, k: int) -> tuple[float, float]:
    """``(P(X >= k), P(X <= k))`` of a distribution on 0, 1, 2, ... (clipped to [0, 1])."""
    return min(1.0, float(prob[k:].sum())), min(1.0, float(prob[:k + 1].sum()))


def _normal_tails(value: float, mean: float, sd: float, step: float) -> tuple[float, float]:
    """Upper and lower tail p-values of ``value`` under N(mean, sd²), continuity-corrected by half
    of the statistic's ``step``."""
    if sd == 0:
        return 1.0, 1.0
    return float(norm.sf((value - mean - step / 2) / sd)), float(norm.cdf((value - mean + step / 2) / sd))


def _test(statistic: float, share: float, greater: float, less: float, min_p: float, method: str) -> RankTest:
    return RankTest(statistic, share, min(1.0, 2 * min(greater, less)), greater, min_p, method)


def mann_whitney(x: np.ndarray, y: np.ndarray) -> RankTest:
    """Mann–Whitney U test of ``x [n]`` (the variant's runs on one env) against ``y [m]`` (the
    baseline's), exact up to :data:`EXACT_MAX_RUNS` pooled runs."""
    null = _null(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
    n, m = null.n, null.m
    min_p = min(1.0, 2 / math.comb(n + m, n))
    if null.prob is None:
        greater, less = _normal_tails(null.u, n * m / 2, math.sqrt(null.variance), 1.0)
        return _test(null.u, null.u / (n * m), greater, less, min_p, NORMAL)
    greater, less = _tails(null.prob, int(round(2 * null.u)))
    return _test(null.u, null.u / (n * m), greater, less, min_p, EXACT)


def stratified(pairs: list[tuple[np.ndarray, np.ndarray]]) -> RankTest:
    """The stratified test across envs of ``pairs`` (per env: the variant's runs, the baseline's):
    the mean of the per-env ``U / (n m)`` against its exact within-env permutation distribution
    (the normal approximation where an env is past :data:`EXACT_MAX_RUNS` or the lattice of the
    statistic past :data:`MAX_LATTICE`)."""
    nulls = [_null(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)) for x, y in pairs]
    if not nulls:
        raise ValueError("a stratified test needs at least one env")
    share = float(np.mean([z.u / (z.n * z.m) for z in nulls]))
    min_p = min(1.0, 2 / math.prod(math.comb(z.n + z.m, z.n) for z in nulls))
    # On a common lattice: 2U_k / (2 n_k m_k) = 2U_k * (D / (2 n_k m_k)) / D.
    lattice = reduce(math.lcm, (2 * z.n * z.m for z in nulls))
    if any(z.prob is None for z in nulls) or lattice * len(nulls) > MAX_LATTICE:
        sd = math.sqrt(sum(z.variance / (z.n * z.m) ** 2 for z in nulls)) / len(nulls)
        greater, less = _normal_tails(share, 0.5, sd, 1 / (lattice * len(nulls)))
        return _test(share, share, greater, less, min_p, NORMAL)
    total = np.ones(1)
    for z in nulls:
        stride = lattice // (2 * z.n * z.m)
        spread = np.zeros(len(z.prob) * stride - stride + 1)  # type: ignore[arg-type]
        spread[::stride] = z.prob
        total = np.convolve(total, spread)
    observed = sum(int(round(2 * z.u)) * (lattice // (2 * z.n * z.m)) for z in nulls)
    greater, less = _tails(total, observed)
    return _test(share, share, greater, less, min_p, EXACT)


MIN_SEEDS_FOR_INTERVALS = 5
"""Runs per (variant, env) below which the report calls its bootstrap intervals unreliable: a
bootstrap of a handful of runs only reshuffles those values (an IQM interval of 3 runs is their
range; runs that do not overlap give P(> baseline) the degenerate interval [1, 1]), so the report
then reads the exact rank tests instead and makes no claim "with confidence"."""


def reliability(scores: pd.DataFrame, aggregated: dict[str, int] | None = None) -> dict[str, Any]:
    """Whether every (variant, env) of ``scores`` (one row per run) has at least
    :data:`MIN_SEEDS_FOR_INTERVALS` runs, and so every variant's runs in the aggregate across envs
    (``aggregated``: variant -> the seeds it has on every env); which have fewer (``env`` "all" for
    the aggregate)."""
    cells = {(v, e): int(k) for (v, e), k in scores.groupby(["variant", "env"], sort=False).size().items()}
    cells.update({(v, "all"): k for v, k in (aggregated or {}).items()})
    few = [{"variant": v, "env": e, "runs": k} for (v, e), k in cells.items() if k < MIN_SEEDS_FOR_INTERVALS]
    return {"min_runs": MIN_SEEDS_FOR_INTERVALS, "fewest_runs": min(cells.values()), "intervals_reliable": not few,
            "below_min_runs": few}


def against_baseline(scores: pd.DataFrame, variants: list[str], baseline: str) -> dict[str, Any]:
    """Every variant against ``baseline``: a Mann–Whitney test per env where both have runs
    (``per_env``) and the stratified test across those envs (``combined``)."""
    per_env, combined = [], {}
    base = scores[scores.variant == baseline]
    for variant in variants:
        if variant == baseline:
            continue
        mine = scores[scores.variant == variant]
        pairs, envs = [], []
        for env in sorted(set(mine.env) & set(base.env)):
            x = mine[mine.env == env]["score"].to_numpy(dtype=np.float64)
            y = base[base.env == env]["score"].to_numpy(dtype=np.float64)
            per_env.append({"env": env, "variant": variant, "runs": len(x), "baseline_runs": len(y),
                            **mann_whitney(x, y).to_json()})
            pairs.append((x, y))
            envs.append(env)
        if pairs:
            combined[variant] = {"envs": envs, **stratified(pairs).to_json()}
    return {"baseline": baseline, "per_env": per_env, "combined": combined}
