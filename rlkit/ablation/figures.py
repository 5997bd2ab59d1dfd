"""The report's figures (matplotlib, PNG): every axis labelled, one colour per variant throughout."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from rlkit.ablation.bootstrap import seeded_global_numpy  # noqa: E402
from rlkit.ablation.stats import iqm_curve  # noqa: E402


def colours(variants: list[str]) -> dict[str, object]:
    """One distinct colour per variant: tab10, tab20 beyond ten variants, and evenly spaced hues
    beyond twenty (no two variants share a colour)."""
    if len(variants) > 20:
        cmap = plt.get_cmap("hsv")
        return {v: cmap(i / len(variants)) for i, v in enumerate(variants)}
    cmap = plt.get_cmap("tab10" if len(variants) <= 10 else "tab20")
    return {v: cmap(i) for i, v in enumerate(variants)}


def _intervals(ax: plt.Axes, names: list[str], values: dict[str, list], colour: dict[str, str], xlabel: str) -> None:
    """Per name (row i): its interval as a bar and its point estimate as a diamond, drawn even on
    the axis edge; a zero-width interval is labelled degenerate (its bar is invisible)."""
    for i, name in enumerate(names):
        point, low, high = values[name]
        ax.plot([low, high], [i, i], color=colour[name], linewidth=6, alpha=0.5, solid_capstyle="butt")
        ax.plot([point], [i], "D", color=colour[name], markeredgecolor="black", markersize=7, clip_on=False,
                zorder=3)
    middle = float(np.mean(ax.get_xlim()))
    for i, name in enumerate(names):
        point, low, high = values[name]
        if low == high:
            ax.annotate("degenerate interval", (point, i), xytext=(0, 7), textcoords="offset points", fontsize=7,
                        ha="right" if point >= middle else "left", va="bottom")
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)


def per_env(table: pd.DataFrame, colour: dict[str, str], path: Path) -> None:
    envs = list(dict.fromkeys(table["env"]))
    fig, axes = plt.subplots(1, len(envs), figsize=(max(4.2 * len(envs), 6.0), 0.5 * table["variant"].nunique() + 1.9),
                             squeeze=False)
    for ax, env in zip(axes[0], envs):
        rows = table[table.env == env]
        names = list(rows["variant"])
        values = {r.variant: [r.iqm, r.iqm_low, r.iqm_high] for r in rows.itertuples()}
        _intervals(ax, names, values, colour, "return (IQM, 95% CI)")
        ax.plot(rows["mean"], range(len(rows)), "o", color="white", markeredgecolor="black", markersize=4,
                clip_on=False, zorder=4)
        ax.set_title(env)
    fig.suptitle("Final return per environment\nIQM (diamond) with 95% stratified-bootstrap CI (bar), mean (dot)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def aggregates(estimates: dict[str, dict[str, list]], colour: dict[str, str], path: Path) -> None:
    names = list(estimates)
    metrics = [("iqm", "IQM"), ("median", "Median"), ("mean", "Mean"), ("optimality_gap", "Optimality gap")]
    fig, axes = plt.subplots(1, 4, figsize=(15, 0.5 * len(names) + 1.8), sharey=True)
    for ax, (key, title) in zip(axes, metrics):
        _intervals(ax, names, {n: estimates[n][key] for n in names}, colour, "normalized score")
        ax.set_title(title)
    fig.suptitle("Across environments (min-max normalized scores), 95% stratified-bootstrap CIs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def improvement(probabilities: dict[str, list], baseline: str, colour: dict[str, str], path: Path) -> None:
    fig = improvement_figure(probabilities, baseline, colour)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def improvement_figure(probabilities: dict[str, list], baseline: str, colour: dict[str, str]) -> plt.Figure:
    """P(variant > baseline) per variant: the estimate (a diamond, also at 0 or 1) and its interval."""
    names = list(probabilities)
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(names) + 1.6))
    ax.set_xlim(-0.04, 1.04)  # an estimate of 0 or 1 stays inside the axes
    _intervals(ax, names, probabilities, colour, f"P(variant > {baseline})")
    ax.axvline(0.5, color="grey", linestyle="--")
    ax.set_title(f"Probability of improvement over {baseline} (95% CI)")
    fig.tight_layout()
    return fig


def profiles(matrices: dict[str, np.ndarray], colour: dict[str, str], path: Path, reps: int) -> None:
    from rliable import library as rly

    usable = {k: v for k, v in matrices.items() if len(v)}
    top = max(1.0, max(float(v.max()) for v in usable.values()))
    taus = np.linspace(min(0.0, min(float(v.min()) for v in usable.values())), top, 81)
    with seeded_global_numpy(0):
        points, cis = rly.create_performance_profile(usable, taus, reps=reps)
    fig, ax = plt.subplots(figsize=(9.5 if len(usable) > 5 else 7, 4.5))
    for name in usable:
        ax.plot(taus, points[name], color=colour[name], label=name)
        ax.fill_between(taus, cis[name][0], cis[name][1], color=colour[name], alpha=0.2)
    ax.set_xlabel("normalized score τ")
    ax.set_ylabel("fraction of runs with score > τ")
    ax.set_title("Performance profiles (95% CI bands)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0)) if len(usable) > 5 else ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def curves(results: pd.DataFrame, x: str, colour: dict[str, str], path: Path, points: int = 50) -> None:
    """Learning curves per env: IQM across seeds with a 95% bootstrap band, each run interpolated
    onto a common grid of ``x`` (``step`` or ``wall_s``) up to where every run of the variant reaches."""
    envs = list(dict.fromkeys(results["env"]))
    many = results["variant"].nunique() > 5
    fig, axes = plt.subplots(1, len(envs), figsize=(5.5 * len(envs) + (2.5 if many else 0), 4.2), squeeze=False)
    for ax, env in zip(axes[0], envs):
        group = results[(results.env == env) & results[x].notna()]
        for variant, runs in group.groupby("variant", sort=False):
            per_run = [r.sort_values(x) for _, r in runs.groupby("seed")]
            end = min(float(r[x].max()) for r in per_run)
            grid = np.linspace(min(float(r[x].min()) for r in per_run), end, points)
            matrix = np.stack([np.interp(grid, r[x], r["eval_return_mean"]) for r in per_run])
            iqm, low, high = iqm_curve(matrix)
            ax.plot(grid, iqm, color=colour[variant], label=f"{variant} ({len(per_run)} seeds)")
            ax.fill_between(grid, low, high, color=colour[variant], alpha=0.2)
        ax.set_title(env)
        ax.set_xlabel("environment steps" if x == "step" else "training time (s)")
        ax.set_ylabel("evaluation return (IQM, 95% CI)")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0)) if many else axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
