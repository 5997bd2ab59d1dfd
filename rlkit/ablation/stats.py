"""The statistics of ``rlkit report``, after Agarwal et al. (2021, "Deep RL at the Edge of the
Statistical Precipice"): interquartile mean (IQM), median, mean and optimality gap of normalized
scores with 95% stratified-bootstrap confidence intervals, probability of improvement, and
performance profiles — rliable's definitions and resamples, computed for all resamples at once
(:mod:`rlkit.ablation.bootstrap`, tested equal to rliable's). Learning curves take the IQM across
runs at every point of a common grid with a vectorized percentile bootstrap (:func:`iqm_curve`,
the same definition as rliable's IQM, tested against it).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import pandas as pd
from scipy.stats import trim_mean

from rlkit.ablation import bootstrap

REPS = 20_000
"""Bootstrap resamples of every interval of the report unless told otherwise (``--reps``); an
endpoint's resampling error shrinks as one over the square root of this."""


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


def train100_scores(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per finished run: the mean return of its last 100 training episodes (its
    ``train_return_last100``, the PPO paper's score; NaN where a run recorded none, as the
    reference implementations do) at its last step."""
    done = runs[runs["status"] == "done"]
    score = pd.to_numeric(done.get("train_return_last100", pd.Series(np.nan, index=done.index)), errors="coerce")
    return pd.DataFrame({"variant": done["variant"], "env": done["env"], "seed": done["seed"],
                         "step": done["total_steps"], "score": score.astype(float)}).reset_index(drop=True)


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


def aggregated_runs(scores: pd.DataFrame, variants: list[str]) -> pd.DataFrame:
    """The rows of ``scores`` that :func:`score_matrices` keeps: on the envs every variant has runs
    on, each variant's seeds that finished on every one of those envs."""
    envs = set.intersection(*(set(scores[scores.variant == v].env) for v in variants))
    rows = scores[scores.variant.isin(variants) & scores.env.isin(envs)]
    return rows[rows.groupby(["variant", "seed"])["env"].transform("nunique") == len(envs)]


def envs_left_out(scores: pd.DataFrame, variants: list[str], usable: dict[str, bool],
                  unusable: str = "no run beats the random policy", envs: Sequence[str] = ()) -> dict[str, str]:
    """``{env: why}`` for each env of ``scores`` or of ``envs`` (the report's) that the aggregate
    across envs of ``variants`` leaves out: no finished run with a finite score, no usable reference
    (``usable[env]`` False, ``unusable`` says why), or variants without finished runs there."""
    out = {env: "no finished run with a finite score" for env in envs if not (scores.env == env).any()}
    for env in sorted(scores["env"].unique()):
        missing = [v for v in variants if not (scores[scores.env == env].variant == v).any()]
        if not usable[env]:
            out[env] = f"{unusable} (no reference to normalize by)"
        elif missing:
            out[env] = f"no finished runs of {', '.join(missing)}"
    return dict(sorted(out.items()))


def interval_estimates(matrices: dict[str, np.ndarray], reps: int, seed: int = 0) -> dict[str, dict[str, list]]:
    """``{variant: {metric: [point, low, high]}}`` for IQM, median, mean and optimality gap."""
    usable = {k: v for k, v in matrices.items() if len(v)}
    points, cis = bootstrap.intervals(usable, bootstrap.aggregates, reps, seed)
    names = tuple(bootstrap.AGGREGATES)
    return {v: {n: [float(points[v][i]), float(cis[v][0, i]), float(cis[v][1, i])] for i, n in enumerate(names)}
            for v in usable}


def improvement(matrices: dict[str, np.ndarray], baseline: str, reps: int, seed: int = 0) -> dict[str, list]:
    """``{variant: [P(variant > baseline), low, high]}`` with stratified-bootstrap CIs."""
    pairs = {f"{v},{baseline}": (m, matrices[baseline]) for v, m in matrices.items()
             if v != baseline and len(m) and len(matrices[baseline])}
    if not pairs:
        return {}
    points, cis = bootstrap.intervals(pairs, bootstrap.improvement_probability, reps, seed)
    return {k.split(",")[0]: [float(np.ravel(points[k])[0]), *map(float, np.ravel(cis[k])[:2])] for k in pairs}


class Profiles(NamedTuple):
    """Performance profiles of normalized scores: per variant, the fraction of its runs scoring
    above each threshold, with 95% stratified-bootstrap bands."""

    taus: np.ndarray
    """The thresholds ``[T]``."""
    points: dict[str, np.ndarray]
    """``{variant: [T]}``."""
    bands: dict[str, np.ndarray]
    """``{variant: [2, T]}`` (low, high)."""


def profiles(matrices: dict[str, np.ndarray], reps: int, seed: int = 0) -> Profiles:
    """The profiles of every variant with runs, at 81 thresholds from min(0, lowest score) to
    max(1, highest score)."""
    usable = {k: v for k, v in matrices.items() if len(v)}
    top = max(1.0, max(float(v.max()) for v in usable.values()))
    taus = np.linspace(min(0.0, min(float(v.min()) for v in usable.values())), top, 81)
    points, bands = bootstrap.intervals(usable, bootstrap.profile(taus), reps, seed)
    return Profiles(taus, points, bands)


def iqm_curve(curves: np.ndarray, reps: int = 1000, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IQM across runs of ``curves [runs, T]`` at each of T points, with a 95% percentile-bootstrap
    interval over runs: ``(iqm [T], low [T], high [T])``."""
    curves = np.asarray(curves, dtype=np.float64)
    point = trim_mean(curves, 0.25, axis=0)
    if len(curves) < 2:
        return point, point.copy(), point.copy()
    idx = np.random.default_rng(seed).integers(0, len(curves), size=(reps, len(curves)))
    runs = np.sort(curves[idx], axis=1)  # [reps, runs, T], each resample's runs in order at every point
    cut = int(0.25 * len(curves))  # as scipy's trim_mean cuts
    boot = runs[:, cut:len(curves) - cut].mean(axis=1)  # [reps, T]
    low, high = np.percentile(boot, [2.5, 97.5], axis=0)
    return point, low, high


def per_env_table(scores: pd.DataFrame, reps: int, seed: int = 0) -> pd.DataFrame:
    """Per env and variant: runs, mean, standard error, IQM and its 95% stratified-bootstrap CI."""
    rows = []
    for (env, variant), group in scores.groupby(["env", "variant"], sort=False):
        x = group["score"].to_numpy(dtype=np.float64)[:, None]
        point, ci = bootstrap.intervals({"v": x}, lambda s: bootstrap.iqm(s)[:, None], reps, seed)
        rows.append({"env": env, "variant": variant, "runs": len(x), "mean": float(x.mean()),
                     "se": float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan"),
                     "iqm": float(point["v"][0]), "iqm_low": float(ci["v"][0, 0]), "iqm_high": float(ci["v"][1, 0])})
    return pd.DataFrame(rows)
