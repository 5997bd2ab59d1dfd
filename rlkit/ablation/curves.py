"""The report's learning curves: per env and variant, the IQM across seeds of the evaluation
return with a 95% bootstrap band, each run interpolated onto a common grid up to where every run
of the variant reaches. Drawn two ways: every variant of an env in one panel (:func:`overlay`),
and, for many variants, one row of panels per variant against the baseline (:func:`against_baseline`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from rlkit.ablation.figures import Look, legend_below, panels, plt, save, steps_axis
from rlkit.ablation.stats import iqm_curve

MANY = 4
"""Past this many variants beside the baseline, the report also draws each against the baseline
alone (the overlay's bands crowd each other)."""


@dataclass(frozen=True)
class Curve:
    """One variant's learning curve on one env."""

    grid: np.ndarray
    """Where it is read ``[P]`` (env steps or training seconds)."""
    iqm: np.ndarray
    """IQM across seeds ``[P]``."""
    low: np.ndarray
    """The band's lower edge ``[P]``."""
    high: np.ndarray
    """The band's upper edge ``[P]``."""
    seeds: int
    """Runs it is computed from."""


Curves = dict[tuple[str, str], Curve]
"""``{(env, variant): Curve}``."""


def compute(results: pd.DataFrame, x: str, variants: Sequence[str], reps: int, points: int = 50) -> Curves:
    """The curves of ``variants`` on every env against ``x`` (``step`` or ``wall_s``), bands from
    ``reps`` resamples of the seeds. A run with a NaN or infinite evaluation return is left out (as
    the report's tables leave it out); a curve's ``seeds`` counts the runs drawn."""
    out: Curves = {}
    for env in dict.fromkeys(results["env"]):
        group = results[(results.env == env) & results[x].notna()]
        for variant in variants:
            per_run = [r.sort_values(x) for _, r in group[group.variant == variant].groupby("seed")
                       if np.isfinite(r["eval_return_mean"].to_numpy(dtype=np.float64)).all()]
            if not per_run:
                continue
            end = min(float(r[x].max()) for r in per_run)
            grid = np.linspace(min(float(r[x].min()) for r in per_run), end, points)
            matrix = np.stack([np.interp(grid, r[x], r["eval_return_mean"]) for r in per_run])
            out[(env, variant)] = Curve(grid, *iqm_curve(matrix, reps=reps), seeds=len(per_run))
    return out


def _draw(ax: plt.Axes, curve: Curve, look: Look, band_alpha: float) -> object:
    (line,) = ax.plot(curve.grid, curve.iqm, color=look.colour, linestyle=look.line, linewidth=look.width,
                      zorder=3 if look.width > 2 else 2)
    ax.fill_between(curve.grid, curve.low, curve.high, color=look.colour, alpha=band_alpha, linewidth=0)
    return line


def _x_axis(ax: plt.Axes, x: str, label: bool = True) -> None:
    if x == "step":
        steps_axis(ax)
    if label:
        ax.set_xlabel("environment steps" if x == "step" else "training time (s)", fontsize=9)
    ax.grid(alpha=0.3)


def _seeds(curves: Curves, variant: str) -> str:
    counts = sorted({c.seeds for (_, v), c in curves.items() if v == variant})
    if len(counts) > 1:
        return f"{counts[0]}-{counts[-1]} seeds"
    return "1 seed" if counts[0] == 1 else f"{counts[0]} seeds"


def overlay(curves: Curves, x: str, shown: Sequence[str], look: dict[str, Look], path: Path) -> None:
    """Every shown variant of an env in one panel (envs wrapped into rows), one legend below."""
    envs = list(dict.fromkeys(env for env, _ in curves))
    variants = [v for v in shown if any((env, v) in curves for env in envs)]
    band = 0.2 if len(variants) <= MANY + 1 else 0.1
    fig, axes = panels(len(envs), 5.2, 3.8)
    handles = {}
    for ax, env in zip(axes, envs):
        for variant in variants:
            if (env, variant) in curves:
                handles[variant] = _draw(ax, curves[(env, variant)], look[variant], band)
        ax.set_title(env)
        ax.set_ylabel("evaluation return (IQM, 95% CI)", fontsize=9)
        _x_axis(ax, x)
    fig.suptitle("Learning curves: IQM across seeds, 95% bootstrap bands")
    legend_below(fig, [handles[v] for v in variants], [f"{v} ({_seeds(curves, v)})" for v in variants])
    save(fig, path)


def against_baseline(curves: Curves, x: str, baseline: str, shown: Sequence[str], look: dict[str, Look],
                     path: Path) -> None:
    """Small multiples: one row per variant, one column per env, each panel that variant and the
    baseline alone, with their bands; each env's panels on one y scale."""
    envs = list(dict.fromkeys(env for env, _ in curves))
    variants = [v for v in shown if v != baseline and any((env, v) in curves for env in envs)]
    fig, axes = plt.subplots(len(variants), len(envs), figsize=(3.4 * len(envs) + 0.6, 1.75 * len(variants) + 1.0),
                             squeeze=False, sharex="col", sharey="col", layout="constrained")
    for row, variant in enumerate(variants):
        for col, env in enumerate(envs):
            ax = axes[row][col]
            for name in (baseline, variant):
                if (env, name) in curves:
                    _draw(ax, curves[(env, name)], look[name], 0.2)
            ax.tick_params(labelsize=7)
            _x_axis(ax, x, label=row == len(variants) - 1)
            if row == 0:
                ax.set_title(env, fontsize=10)
        axes[row][0].set_ylabel(variant, color=look[variant].colour, fontsize=9, fontweight="bold")
    fig.suptitle(f"Each variant (its colour) against {baseline} (black): evaluation return, IQM across seeds "
                 "with 95% bootstrap bands", fontsize=10)
    save(fig, path)
