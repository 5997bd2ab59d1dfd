"""The statistics of ``rlkit report``, after Agarwal et al. (2021, "Deep RL at the Edge of the
Statistical Precipice"): interquartile mean (IQM), median, mean and optimality gap of normalized
scores with 95% stratified-bootstrap confidence intervals, probability of improvement, and
performance profiles — computed with ``rliable``. Learning curves take the IQM across runs at
every point of a common grid with a vectorized percentile bootstrap (:func:`iqm_curve`, the same
definition as rliable's IQM, tested against it).
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
import pandas as pd
from scipy.stats import trim_mean

# rliable passes a RandomState to arch's bootstrap, which warns that it will want a Generator one day.
warnings.filterwarnings("ignore", message="random_state is deprecated", category=FutureWarning)


@contextmanager
def seeded_global_numpy(seed: int) -> Iterator[None]:
    """rliable's stratified bootstrap draws its resamples from NumPy's global RNG (its
    ``random_state`` only reaches arch's own, unused, generator), so the report seeds that RNG for
    the call and restores its state after: the same sweep always gives the same intervals."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def bootstrap_intervals(scores: dict, statistic: Any, reps: int, seed: int) -> tuple[dict, dict]:
    """rliable's stratified-bootstrap ``(points, cis)`` of ``statistic`` over ``scores``
    (``{name: [runs, tasks]}``, or pairs for probability of improvement), seeded."""
    from rliable import library as rly

    with seeded_global_numpy(seed):
        return rly.get_interval_estimates(scores, statistic, reps=reps, random_state=np.random.RandomState(seed))


def final_scores(results: pd.DataFrame) -> pd.DataFrame:
    """One row per run: its last evaluation's mean return (``score``, NaN stays NaN) and step."""
    last = results.sort_values("step", kind="stable").groupby(["variant", "env", "seed"]).tail(1)
    return last.rename(columns={"eval_return_mean": "score"})[["variant", "env", "seed", "step", "score"]]


def auc_scores(results: pd.DataFrame, grid_points: int = 50) -> pd.DataFrame:
    """One row per run: the mean return over a common step grid per env (area under the learning
    curve divided by its length); runs of unequal length are interpolated onto the grid and held
    at their last value past their end."""
    rows = []
    for env, group in results.groupby("env"):
        grid = np.linspace(group["step"].min(), group["step"].max(), grid_points)
        for (variant, seed), run in group.groupby(["variant", "seed"]):
            run = run.sort_values("step")
            rows.append({"variant": variant, "env": env, "seed": seed, "step": int(run["step"].max()),
                         "score": float(np.interp(grid, run["step"], run["eval_return_mean"]).mean())})
    return pd.DataFrame(rows)


def normalize(scores: pd.DataFrame, references: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Min-max normalized ``score``: ``(score - random) / (reference - random)`` per env."""
    out = scores.copy()
    lo = out["env"].map(lambda e: references[e]["random"])
    hi = out["env"].map(lambda e: references[e]["reference"])
    out["score"] = (out["score"] - lo) / (hi - lo)
    return out


def score_matrices(scores: pd.DataFrame, variants: list[str]) -> tuple[dict[str, np.ndarray], list[str]]:
    """``{variant: [runs, envs]}`` over the envs every variant has runs on; a variant's runs per env
    are its seeds that finished on every one of those envs (rliable needs a full matrix)."""
    envs = sorted(set.intersection(*(set(scores[scores.variant == v].env) for v in variants)))
    matrices = {}
    for v in variants:
        table = scores[(scores.variant == v) & scores.env.isin(envs)].pivot(index="seed", columns="env",
                                                                            values="score")
        matrices[v] = table[envs].dropna().to_numpy(dtype=np.float64)
    return matrices, envs


def interval_estimates(matrices: dict[str, np.ndarray], reps: int, seed: int = 0) -> dict[str, dict[str, list]]:
    """``{variant: {metric: [point, low, high]}}`` for IQM, median, mean and optimality gap."""
    from rliable import metrics

    def aggregate(x: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(x), metrics.aggregate_median(x), metrics.aggregate_mean(x),
                         metrics.aggregate_optimality_gap(x)])

    usable = {k: v for k, v in matrices.items() if len(v)}
    points, cis = bootstrap_intervals(usable, aggregate, reps, seed)
    names = ("iqm", "median", "mean", "optimality_gap")
    return {v: {n: [float(points[v][i]), float(cis[v][0, i]), float(cis[v][1, i])] for i, n in enumerate(names)}
            for v in usable}


def improvement(matrices: dict[str, np.ndarray], baseline: str, reps: int, seed: int = 0) -> dict[str, list]:
    """``{variant: [P(variant > baseline), low, high]}`` with stratified-bootstrap CIs."""
    from rliable import metrics

    pairs = {f"{v},{baseline}": (m, matrices[baseline]) for v, m in matrices.items()
             if v != baseline and len(m) and len(matrices[baseline])}
    if not pairs:
        return {}
    points, cis = bootstrap_intervals(pairs, metrics.probability_of_improvement, reps, seed)
    return {k.split(",")[0]: [float(np.ravel(points[k])[0]), *map(float, np.ravel(cis[k])[:2])] for k in pairs}


def iqm_curve(curves: np.ndarray, reps: int = 1000, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IQM across runs of ``curves [runs, T]`` at each of T points, with a 95% percentile-bootstrap
    interval over runs: ``(iqm [T], low [T], high [T])``."""
    curves = np.asarray(curves, dtype=np.float64)
    point = trim_mean(curves, 0.25, axis=0)
    if len(curves) < 2:
        return point, point.copy(), point.copy()
    idx = np.random.default_rng(seed).integers(0, len(curves), size=(reps, len(curves)))
    boot = trim_mean(curves[idx], 0.25, axis=1)  # [reps, T]
    low, high = np.percentile(boot, [2.5, 97.5], axis=0)
    return point, low, high


def per_env_table(scores: pd.DataFrame, reps: int, seed: int = 0) -> pd.DataFrame:
    """Per env and variant: runs, mean, standard error, IQM and its 95% stratified-bootstrap CI."""
    from rliable import metrics

    rows = []
    for (env, variant), group in scores.groupby(["env", "variant"], sort=False):
        x = group["score"].to_numpy(dtype=np.float64)[:, None]
        point, ci = bootstrap_intervals({"v": x}, lambda s: np.array([metrics.aggregate_iqm(s)]), reps, seed)
        rows.append({"env": env, "variant": variant, "runs": len(x), "mean": float(x.mean()),
                     "se": float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan"),
                     "iqm": float(point["v"][0]), "iqm_low": float(ci["v"][0, 0]), "iqm_high": float(ci["v"][1, 0])})
    return pd.DataFrame(rows)
