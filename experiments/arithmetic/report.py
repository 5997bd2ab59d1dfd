"""The arithmetic recipe's report from ``OUT/curve.jsonl`` (run.py and trl_grpo.py): per method,
each seed's held-out accuracy with its 95% interval over the held-out problems at its last point
within ``--minutes`` of training (equal wall time; default: its last point), the mean over seeds,
seconds per iteration and peak memory; and a figure of held-out accuracy over training
seconds (one line per seed, the initial model's accuracy as a dashed line).

    python experiments/arithmetic/report.py runs/arithmetic     # writes report.md and curve.png there
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def load(curve: Path) -> tuple[dict | None, dict[str, dict[int, list[dict]]]]:
    """The initial model's point and, per method and seed, its points in training order."""
    if not curve.is_file():
        raise SystemExit(f"no {curve}: run run.py (or trl_grpo.py) with this --out first")
    initial, runs = None, defaultdict(lambda: defaultdict(list))
    lines = curve.read_text().splitlines()
    for i, line in enumerate(lines):
        try:
            point = json.loads(line)
        except ValueError:
            if i == len(lines) - 1:  # cut off by a kill: its segment is trained again
                break
            raise SystemExit(f"{curve}: line {i + 1} is not JSON") from None
        if not is_point(point):
            raise SystemExit(f"{curve}: line {i + 1} is not a point (method, seed, iterations, train_seconds, "
                             "accuracy)")
        if point["method"] == "initial":
            initial = point
        else:
            runs[point["method"]][point["seed"]].append(point)
    for seeds in runs.values():
        for points in seeds.values():
            points.sort(key=lambda p: p["iterations"])
    return initial, runs


def is_point(point: object) -> bool:
    """Whether a curve line holds what the report reads."""
    if not isinstance(point, dict) or not isinstance(point.get("accuracy"), dict):
        return False
    numbers = [point.get(k) for k in ("iterations", "train_seconds")] + [point["accuracy"].get(k) for k in
                                                                          ("mean", "low", "high")]
    return (isinstance(point.get("method"), str) and type(point.get("seed")) is int
            and all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers))


def within(points: list[dict], minutes: float | None) -> list[dict]:
    """The points of one seed up to ``minutes`` of training (all of them without a budget)."""
    return points if minutes is None else [p for p in points if p["train_seconds"] <= minutes * 60]


def table(initial: dict | None, runs: dict[str, dict[int, list[dict]]], minutes: float | None = None) -> list[str]:
    lines = ["| method | seed | iterations | train s | s / iteration | held-out accuracy [95% CI] | peak RSS (GB): first "
             "segment / later |",
             "|---|---|---|---|---|---|---|"]
    if initial is not None:
        a = initial["accuracy"]
        lines.append(f"| initial model | — | 0 | — | — | {a['mean']:.3f} [{a['low']:.3f}, {a['high']:.3f}] | — |")
    for method, seeds in sorted(runs.items()):
        finals = []
        for seed, points in sorted(seeds.items()):
            if not within(points, minutes):
                lines.append(f"| {method} | {seed} | no point within {minutes:g} minutes | | | | |")
                continue
            kept = within(points, minutes)
            finals.append(kept)
            last, a = kept[-1], kept[-1]["accuracy"]
            lines.append(f"| {method} | {seed} | {last['iterations']} | {last['train_seconds']:.0f} | "
                         f"{last['train_seconds'] / last['iterations']:.2f} | {a['mean']:.3f} [{a['low']:.3f}, "
                         f"{a['high']:.3f}] | {peaks(kept)} |")
        if finals and len(seeds) > 1:
            lines.append(mean_row(method, finals, len(seeds)))
    return lines


def peaks(points: list[dict]) -> str:
    """Peak memory of the first segment's process (a fresh one) / the largest of the later ones."""
    gb = [p.get("peak_rss_gb") or 0.0 for p in points]
    return f"{gb[0]:.2f} / {max(gb[1:]):.2f}" if len(gb) > 1 else f"{gb[0]:.2f}"


def mean_row(method: str, finals: list[list[dict]], seeds: int) -> str:
    """The mean over seeds of iterations, seconds per iteration and accuracy (with the seeds' lowest
    and highest accuracy: a few seeds give no interval worth the name), and the largest peaks; the
    label says when a seed had no point within the budget."""
    lasts = [kept[-1] for kept in finals]
    label = f"mean of {len(lasts)}" + (f" of {seeds} seeds" if seeds > len(lasts) else "")
    accuracy = [p["accuracy"]["mean"] for p in lasts]
    first = max(kept[0].get("peak_rss_gb") or 0.0 for kept in finals)
    later = [p.get("peak_rss_gb") or 0.0 for kept in finals for p in kept[1:]]
    return (f"| {method} | {label} | {sum(p['iterations'] for p in lasts) / len(lasts):.1f} | | "
            f"{sum(p['train_seconds'] / p['iterations'] for p in lasts) / len(lasts):.2f} | "
            f"{sum(accuracy) / len(accuracy):.3f} (seeds {min(accuracy):.3f}–{max(accuracy):.3f}) | "
            f"{first:.2f}" + (f" / {max(later):.2f} |" if later else " |"))


def figure(initial: dict | None, runs: dict[str, dict[int, list[dict]]], path: Path, minutes: float | None = None
           ) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    colours = plt.get_cmap("tab10")
    for i, (method, seeds) in enumerate(sorted(runs.items())):
        for j, (seed, points) in enumerate(sorted(seeds.items())):
            ax.plot([0] + [p["train_seconds"] / 60 for p in points],
                    [initial["accuracy"]["mean"] if initial else float("nan")] + [p["accuracy"]["mean"] for p in points],
                    color=colours(i), alpha=0.8, label=method if j == 0 else None)
    if initial is not None:
        ax.axhline(initial["accuracy"]["mean"], color="grey", linestyle="--", label="initial model")
    if minutes is not None:
        ax.axvline(minutes, color="black", linestyle=":", label="equal wall time")
    ax.set_xlabel("training minutes (model loading and evaluation excluded)")
    ax.set_ylabel("held-out accuracy (greedy)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the folder holding curve.jsonl; report.md and curve.png are written there")
    parser.add_argument("--minutes", type=float, default=None,
                        help="compare at equal wall time: each seed's last point within this much training")
    args = parser.parse_args()
    if args.minutes is not None and not args.minutes > 0:
        raise SystemExit(f"--minutes must be > 0, got {args.minutes}")
    out = Path(args.out)
    initial, runs = load(out / "curve.jsonl")
    budget = f" after at most {args.minutes:g} minutes of training" if args.minutes else ""
    (out / "report.md").write_text(f"# Arithmetic with a verifiable reward: held-out accuracy{budget}\n\n"
                                   + "\n".join(table(initial, runs, args.minutes)) + "\n\n![curve](curve.png)\n")
    figure(initial, runs, out / "curve.png", args.minutes)
    print(out / "report.md")


if __name__ == "__main__":
    main()
