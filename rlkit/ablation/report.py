"""``rlkit report``: statistics and figures of a sweep, written to ``SWEEP_DIR/report/``
(``report.md``, ``summary.json`` and PNG figures). An unfinished sweep is reported on what
finished, with the missing and failed runs listed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlkit.ablation import figures, stats
from rlkit.ablation.results import write_tables
from rlkit.ablation.spec import expand
from rlkit.errors import ConfigError


def random_return(env_id: str, episodes: int = 10, seed: int = 10_000) -> float:
    """Mean return of uniformly random actions (the 'random' end of min-max normalization)."""
    import gymnasium as gym

    from rlkit.gym.agent import run_episodes

    space = gym.make(env_id).action_space
    space.seed(seed)
    return run_episodes(lambda obs: space.sample(), env_id, episodes, seed).mean


def references(scores: pd.DataFrame, given: dict[str, dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Per env: the spec's ``random``/``reference`` scores, or measured ones (a random policy's
    return; the best run's score), saying which."""
    out = {}
    for env in sorted(scores["env"].unique()):
        if env in given:
            out[env] = {**given[env], "source": "spec"}
        else:
            out[env] = {"random": random_return(env), "reference": float(scores[scores.env == env]["score"].max()),
                        "source": "measured: random policy; best run"}
            if out[env]["reference"] <= out[env]["random"]:
                out[env]["reference"] = out[env]["random"] + 1.0
    return out


def _load(sweep: Path) -> tuple[Any, pd.DataFrame, pd.DataFrame]:
    manifest = sweep / "manifest.json"
    if not manifest.is_file():
        raise ConfigError(f"{sweep} is not a sweep directory (no manifest.json); run rlkit sweep first")
    stored = json.loads(manifest.read_text())
    spec = expand(stored["spec"], str(manifest), stored.get("budget"))
    write_tables(sweep, spec)  # from the runs' own files: a run that finished after the sweep stopped counts
    runs = pd.read_csv(sweep / "runs.csv")
    results = pd.read_csv(sweep / "results.csv")
    if results.empty:
        raise ConfigError(f"{sweep}: no run has finished yet ({len(runs)} planned); nothing to report")
    return spec, runs, results


def write_report(sweep_dir: str, baseline: str | None = None, metric: str = "final", normalize: str = "minmax",
                 reps: int = 2000) -> dict[str, Any]:
    """Write the report; returns the paths written and the run counts."""
    sweep = Path(sweep_dir)
    spec, runs, results = _load(sweep)
    variants = [v for v in spec.variants if v in set(results["variant"])]
    baseline = baseline or spec.baseline
    if baseline not in variants:
        raise ConfigError(f"--baseline {baseline!r} has no finished runs; choose from {', '.join(variants)}")
    scores = stats.final_scores(results) if metric == "final" else stats.auc_scores(results)
    out = sweep / "report"
    out.mkdir(exist_ok=True)
    colour = figures.colours(spec.variants)
    per_env = stats.per_env_table(scores, reps)
    summary: dict[str, Any] = {"metric": metric, "baseline": baseline, "per_env": per_env.to_dict("records"),
                               "runs": runs["status"].value_counts().to_dict(), "cost": _cost(runs)}
    figures.per_env(per_env, colour, out / "per_env.png")
    figures.curves(results, "step", colour, out / "curves_steps.png")
    figures.curves(results, "wall_s", colour, out / "curves_wallclock.png")
    pngs = ["per_env.png", "curves_steps.png", "curves_wallclock.png"]
    if normalize == "minmax":
        refs = references(scores, spec.reference)
        matrices, envs = stats.score_matrices(stats.normalize(scores, refs), variants)
        summary.update(references=refs, envs_aggregated=envs, seeds_aggregated={v: len(m) for v, m in matrices.items()},
                       aggregate=stats.interval_estimates(matrices, reps),
                       improvement=stats.improvement(matrices, baseline, reps))
        figures.aggregates(summary["aggregate"], colour, out / "aggregate.png")
        figures.profiles(matrices, colour, out / "profiles.png", reps=min(reps, 1000))
        pngs += ["aggregate.png", "profiles.png"]
        if summary["improvement"]:
            figures.improvement(summary["improvement"], baseline, colour, out / "improvement.png")
            pngs.append("improvement.png")
    (out / "summary.json").write_text(json.dumps(_finite(summary), indent=1))
    (out / "report.md").write_text(_markdown(spec, runs, summary, pngs))
    return {"report": str(out / "report.md"), "summary": str(out / "summary.json"), "figures": pngs,
            "runs": summary["runs"]}


def _cost(runs: pd.DataFrame) -> dict[str, dict[str, dict[str, float]]]:
    """Mean training seconds and steps/s of the finished runs, by variant and env."""
    done = runs[runs.status == "done"]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (variant, env), g in done.groupby(["variant", "env"], sort=False):
        out.setdefault(str(variant), {})[str(env)] = {"train_seconds": float(g["train_seconds"].mean()),
                                                      "steps_per_second": float(g["steps_per_second"].mean())}
    return out


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, np.generic):
        return _finite(value.item())
    return value


def _markdown(spec: Any, runs: pd.DataFrame, s: dict[str, Any], pngs: list[str]) -> str:
    lines = [f"# Sweep report: {spec.name}", "",
             f"Metric: **{s['metric']}** return of each run ({'last evaluation' if s['metric'] == 'final' else 'mean over a common step grid'}); "
             f"baseline **{s['baseline']}**. Runs: " + ", ".join(f"{n} {k}" for k, n in s["runs"].items()) + ".", ""]
    missing = runs[runs.status != "done"]
    if len(missing):
        lines += ["Not included (unfinished or failed):", ""]
        lines += [f"- {r.variant} / {r.env} / seed {r.seed}: {r.status}" + (f" — {r.error}" if isinstance(r.error, str)
                                                                          and r.error else "") for r in missing.itertuples()]
        lines.append("")
    lines += ["## Per environment", "", "| env | variant | runs | mean ± s.e. | IQM [95% CI] | train s | steps/s |",
              "|---|---|---|---|---|---|---|"]
    for r in s["per_env"]:
        cost = s["cost"].get(r["variant"], {}).get(r["env"], {})
        lines.append(f"| {r['env']} | {r['variant']} | {r['runs']} | {r['mean']:.1f} ± {r['se']:.1f} | "
                     f"{r['iqm']:.1f} [{r['iqm_low']:.1f}, {r['iqm_high']:.1f}] | {cost.get('train_seconds', float('nan')):.1f} | "
                     f"{cost.get('steps_per_second', float('nan')):,.0f} |")
    if "aggregate" in s:
        lines += ["", "## Across environments (min-max normalized)", "",
                  "References: " + "; ".join(f"{e}: random {r['random']:.1f}, reference {r['reference']:.1f} ({r['source']})"
                                             for e, r in s["references"].items()), "",
                  "| variant | seeds | IQM | median | mean | optimality gap | P(> baseline) |", "|---|---|---|---|---|---|---|"]
        fmt = lambda x: f"{x[0]:.3f} [{x[1]:.3f}, {x[2]:.3f}]"  # noqa: E731
        for v, a in s["aggregate"].items():
            p = s["improvement"].get(v)
            lines.append(f"| {v} | {s['seeds_aggregated'][v]} | {fmt(a['iqm'])} | {fmt(a['median'])} | {fmt(a['mean'])} | "
                         f"{fmt(a['optimality_gap'])} | {fmt(p) if p else '—'} |")
        lines += ["", "Intervals are 95% stratified-bootstrap CIs (rliable). A variant is better than the baseline "
                      "with confidence when its P(> baseline) interval lies above 0.5; overlapping IQM intervals "
                      "alone do not show a difference."]
    lines += ["", "## Figures", ""] + [f"![{p}]({p})" for p in pngs]
    return "\n".join(lines) + "\n"
