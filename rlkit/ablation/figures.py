"""The report's figures (matplotlib, PNG): every axis labelled, each variant drawn the same way in
every figure (:func:`looks`), many environments wrapped into rows, one legend per figure outside
its panels. The learning curves are in :mod:`rlkit.ablation.curves`."""

from __future__ import annotations

import colorsys
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from rlkit.ablation.stats import Profiles  # noqa: E402

DPI = 110

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")
"""The variants' colours first (matplotlib's tab10 without its grey), drawn with solid lines."""
DARK = ("#08306b", "#e6ab02", "#1b9e77", "#7f0000", "#7570b3", "#e7298a", "#6b6b00")
"""The next variants' colours, drawn dashed: no two variants of a report share colour and line."""
REFERENCE = ("#7f7f7f", "#a0522d", "#556b2f")
"""Reference implementations (SB3, sb3-contrib): grey, sienna, dark olive, drawn dash-dotted."""
BASELINE = "#000000"
"""The baseline: black, a wider line, drawn on top."""


@dataclass(frozen=True)
class Look:
    """How one variant is drawn in every figure of a report."""

    colour: str
    """Its colour (``#rrggbb``): bars, markers, lines and bands."""
    line: str
    """Its line style in learning curves and profiles (matplotlib's ``-``, ``--``, ``:``, ``-.``)."""
    width: float
    """Its line width."""


def looks(variants: Sequence[str], baseline: str | None = None, references: Sequence[str] = ()) -> dict[str, Look]:
    """One look per variant, all different: the baseline black; reference implementations
    :data:`REFERENCE`, dash-dotted; the others :data:`PALETTE` (solid), then :data:`DARK` (dashed), then evenly
    spaced hues (dotted, then dash-dotted) with no colour repeated."""
    out: dict[str, Look] = {}
    rest = [v for v in variants if v != baseline and v not in references]
    fixed = [(c, "-") for c in PALETTE] + [(c, "--") for c in DARK]
    extra = max(0, len(rest) - len(fixed))
    for i in range(extra):  # beyond the fixed colours: hues around the circle, two lightness levels
        r, g, b = colorsys.hls_to_rgb(i / extra, 0.3 if i % 2 else 0.42, 0.75)
        fixed.append((f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}", (":", "-.")[i // 2 % 2]))
    for variant, (colour, line) in zip(rest, fixed):
        out[variant] = Look(colour, line, 1.5)
    for i, variant in enumerate(v for v in variants if v in references and v != baseline):
        out[variant] = Look(REFERENCE[i % len(REFERENCE)], ("-.", (0, (5, 1, 1, 1, 1, 1)))[i // len(REFERENCE) % 2],
                            1.5)
    if baseline is not None and baseline in variants:
        out[baseline] = Look(BASELINE, "-", 2.2)
    return {v: out[v] for v in variants}


def panel_grid(panels: int, most: int = 3) -> tuple[int, int]:
    """``(rows, columns)`` for ``panels`` panels, at most ``most`` per row, rows filled evenly
    (4 panels: 2 x 2, not 3 + 1)."""
    rows = math.ceil(panels / most)
    return rows, math.ceil(panels / rows)


def panels(count: int, width: float, height: float, **kwargs: object) -> tuple[plt.Figure, list[plt.Axes]]:
    """A figure of ``count`` panels of ``width`` x ``height`` inches, wrapped into rows (see
    :func:`panel_grid`); the grid's unused places are removed."""
    rows, cols = panel_grid(count)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, layout="constrained",
                             **kwargs)
    flat = list(axes.ravel())
    for ax in flat[count:]:
        ax.remove()
    return fig, flat[:count]


def legend_below(fig: plt.Figure, handles: list, labels: list[str]) -> None:
    """One legend for the whole figure, centred under its panels, in as many columns as fit (read
    down each column)."""
    columns = max(1, min(len(labels), int(fig.get_figwidth() // 2.6)))
    fig.legend(handles, labels, loc="outside lower center", ncol=columns, fontsize=8, frameon=False)


def steps_axis(ax: plt.Axes) -> None:
    """Env steps as 0, 250k, 1M, 1.5M (no offset text)."""
    def label(x: float, _: object) -> str:
        for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(x) >= size:
                return f"{x / size:g}{unit}"
        return f"{x:g}"
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(label))


def save(fig: plt.Figure, path: Path) -> None:
    """Write the figure with everything drawn outside the axes (legend, long labels) inside the image."""
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)


def _intervals(ax: plt.Axes, names: list[str], values: dict[str, list], look: dict[str, Look], xlabel: str) -> None:
    """Per name (row i): its interval as a bar and its point estimate as a diamond, drawn even on
    the axis edge; a zero-width interval is labelled degenerate (its bar is invisible)."""
    for i, name in enumerate(names):
        point, low, high = values[name]
        ax.plot([low, high], [i, i], color=look[name].colour, linewidth=6, alpha=0.5, solid_capstyle="butt")
        ax.plot([point], [i], "D", color=look[name].colour, markeredgecolor="black", markersize=7, clip_on=False,
                zorder=3)
    middle = float(np.mean(ax.get_xlim()))
    for i, name in enumerate(names):
        point, low, high = values[name]
        if low == high:
            ax.annotate("degenerate interval", (point, i), xytext=(0, 7), textcoords="offset points", fontsize=7,
                        ha="right" if point >= middle else "left", va="bottom")
    ax.set_ylim(len(names) - 0.4, -0.6)  # the first name (the baseline) on top
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)


def per_env(table: pd.DataFrame, look: dict[str, Look], path: Path) -> None:
    """Final return per env: each variant's IQM with its interval, and its mean."""
    envs = list(dict.fromkeys(table["env"]))
    fig, axes = panels(len(envs), 4.6, 0.42 * table["variant"].nunique() + 1.4)
    for ax, env in zip(axes, envs):
        rows = table[table.env == env]
        names = list(rows["variant"])
        values = {r.variant: [r.iqm, r.iqm_low, r.iqm_high] for r in rows.itertuples()}
        _intervals(ax, names, values, look, "return (IQM, 95% CI)")
        ax.plot(rows["mean"], range(len(rows)), "o", color="white", markeredgecolor="black", markersize=4,
                clip_on=False, zorder=4)
        ax.set_title(env)
    fig.suptitle("Final return per environment\nIQM (diamond) with 95% stratified-bootstrap CI (bar), mean (dot)")
    save(fig, path)


def aggregates(estimates: dict[str, dict[str, list]], look: dict[str, Look], path: Path,
               scale: str = "min-max normalized scores") -> None:
    """IQM, median, mean and optimality gap of the normalized scores (``scale`` names how), with their
    intervals."""
    names = list(estimates)
    metrics = [("iqm", "IQM"), ("median", "Median"), ("mean", "Mean"), ("optimality_gap", "Optimality gap")]
    fig, axes = plt.subplots(1, 4, figsize=(15, 0.42 * len(names) + 1.6), sharey=True, layout="constrained")
    for ax, (key, title) in zip(axes, metrics):
        _intervals(ax, names, {n: estimates[n][key] for n in names}, look, "normalized score")
        ax.set_title(title)
    fig.suptitle(f"Across environments ({scale}), 95% stratified-bootstrap CIs")
    save(fig, path)


def improvement(probabilities: dict[str, list], baseline: str, look: dict[str, Look], path: Path) -> None:
    save(improvement_figure(probabilities, baseline, look), path)


def improvement_figure(probabilities: dict[str, list], baseline: str, look: dict[str, Look]) -> plt.Figure:
    """P(variant > baseline) per variant: the estimate (a diamond, also at 0 or 1) and its interval."""
    names = list(probabilities)
    fig, ax = plt.subplots(figsize=(7, 0.42 * len(names) + 1.5), layout="constrained")
    ax.set_xlim(-0.04, 1.04)  # an estimate of 0 or 1 stays inside the axes
    _intervals(ax, names, probabilities, look, f"P(variant > {baseline})")
    ax.axvline(0.5, color="grey", linestyle="--")
    ax.set_title(f"Probability of improvement over {baseline} (95% CI)")
    return fig


def profiles(computed: Profiles, shown: Sequence[str], look: dict[str, Look], path: Path) -> None:
    """Performance profiles of the ``shown`` variants (those with runs), with their bands."""
    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    for name in (n for n in shown if n in computed.points):
        style = look[name]
        ax.plot(computed.taus, computed.points[name], color=style.colour, linestyle=style.line,
                linewidth=style.width, label=name, zorder=3 if style.colour == BASELINE else 2)
        ax.fill_between(computed.taus, *computed.bands[name], color=style.colour, alpha=0.12, linewidth=0)
    ax.set_xlabel("normalized score τ")
    ax.set_ylabel("fraction of runs with score > τ")
    ax.set_title("Performance profiles (95% CI bands)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    save(fig, path)
