"""``rlkit report``: statistics and figures of a sweep, written to ``SWEEP_DIR/report/``
(``report.md``, ``summary.json`` and PNG figures). An unfinished sweep is reported on what
finished, with the missing and failed runs listed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from rlkit.ablation import curves, figures, rank_tests, stats
from rlkit.ablation.references import NORMALIZE, best_mean_over, references
from rlkit.ablation.report_dir import MARKER, check_out, remove_stale
from rlkit.ablation.results import read_manifest, write_tables
from rlkit.ablation.selection import chosen, only_envs
from rlkit.ablation.spec import BASELINES, expand
from rlkit.errors import ConfigError
from rlkit.io.files import check_writable, write_atomic, write_json


def _load(sweep: Path) -> tuple[Any, pd.DataFrame, pd.DataFrame]:
    stored = read_manifest(sweep)
    spec = expand(stored["spec"], str(sweep / "manifest.json"), stored.get("budget"))
    write_tables(sweep, spec, keep_finished=True)  # from the runs' files: a run finished since the sweep counts
    runs = pd.read_csv(sweep / "runs.csv")
    results = pd.read_csv(sweep / "results.csv")
    if results.empty:
        done = int((runs["status"] == "done").sum())
        why = (f"{done} run(s) finished but none recorded an evaluation (eval_episodes = 0?)" if done
               else f"no run has finished yet ({len(runs)} planned)")
        raise ConfigError(f"{sweep}: {why}; nothing to report")
    return spec, runs, results


METRICS = {"final": "last evaluation", "auc": "mean over a common step grid",
           "train100": "mean of the last 100 training episodes"}
"""What ``--metric`` scores each run by."""


MIN_REPS, MAX_REPS = 100, 1_000_000
"""The bootstrap resamples a report accepts (``--reps``): fewer give intervals that can miss their
own point; each resample holds a copy of the runs, so more exhaust memory."""


def write_report(sweep_dir: str, baseline: str | None = None, metric: str = "final", normalize: str = "minmax",
                 reps: int = stats.REPS, variants: Sequence[str] | None = None, out_dir: str | None = None,
                 envs: Sequence[str] | None = None) -> dict[str, Any]:
    """Write the report (to ``out_dir``, default ``SWEEP_DIR/report``); returns the paths written and
    the run counts. ``variants``: show the baseline and these only, in the figures and tables, each
    with the statistics of the full report (the aggregate's are computed over every variant).
    ``envs``: report on these environments alone, every statistic computed over them."""
    _check_options(reps, metric, normalize)
    sweep = Path(sweep_dir)
    out = Path(out_dir) if out_dir is not None else sweep / "report"
    check_out(out, sweep / "report")
    spec, runs, results = _load(sweep)
    if envs is not None:
        runs, results = only_envs(envs, spec.envs, runs, results)
    present = [v for v in spec.variants if v in set(results["variant"])]
    named = f"--baseline {baseline!r}" if baseline else f"the spec's baseline {spec.baseline!r}"
    baseline = baseline or spec.baseline
    if baseline not in spec.variants:
        raise ConfigError(f"--baseline: there is no variant {baseline!r} in this sweep; choose from "
                          f"{', '.join(present)}")
    if baseline not in present:
        raise ConfigError(f"{named} has no finished runs; choose another with --baseline: {', '.join(present)}")
    shown = chosen(variants, spec.variants, present, baseline)
    scores = {"final": lambda: stats.final_scores(results), "auc": lambda: stats.auc_scores(results),
              "train100": lambda: stats.train100_scores(runs)}[metric]()
    broken = scores[~np.isfinite(scores["score"].to_numpy(dtype=float))]
    scores = scores.drop(broken.index)
    if scores.empty:
        raise ConfigError(f"{sweep}: every finished run's score is NaN or inf; nothing to report")
    scored = [v for v in present if v in set(scores["variant"])]  # a variant whose every score is NaN has none
    if baseline not in scored:
        raise ConfigError(f"{named} has no run with a finite {metric} score; choose another with --baseline: "
                          f"{', '.join(scored)}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot write in {out.parent}: {exc.strerror or exc}") from None
    check_writable(out)  # before the figures: matplotlib's own error would be a traceback
    look = figures.looks(spec.variants, baseline, [v for v in spec.variants if v in BASELINES])
    mine = scores[scores.variant.isin(shown)]
    if variants is not None:  # the runs of the variants shown (else every run, also of variants that have none done)
        runs, broken = runs[runs.variant.isin(shown)], broken[broken.variant.isin(shown)]
    summary: dict[str, Any] = {"metric": metric, "baseline": baseline, "normalize": normalize, "reps": reps,
                               "variants": shown,
                               "per_env": _ordered(stats.per_env_table(mine, reps), shown).to_dict("records"),
                               "runs": runs["status"].value_counts().to_dict(), "cost": _cost(runs),
                               "non_finite": broken[["variant", "env", "seed"]].to_dict("records"),
                               "intervals": rank_tests.reliability(mine),
                               "rank_tests": {"method": RANK_METHOD,
                                              **rank_tests.against_baseline(mine, shown, baseline)}}
    if len(shown) < len(present):
        summary["variants_of_sweep"] = present
    if envs is not None:
        summary["envs_of_sweep"] = list(spec.envs)
    pngs = _curve_figures(results, shown, baseline, look, reps, out)
    pngs.insert(0, "per_env.png")
    figures.per_env(pd.DataFrame(summary["per_env"]), look, out / "per_env.png")
    if normalize != "none":
        pngs += _across_envs(spec, scores, scored, shown, baseline, reps, summary, look, out, normalize, list(envs or spec.envs))
    return _finish(out, spec, runs, summary, pngs)


def _check_options(reps: int, metric: str, normalize: str) -> None:
    """A one-line :class:`ConfigError` for ``--reps``, ``--metric`` or ``--normalize`` out of range."""
    if isinstance(reps, bool) or not isinstance(reps, int) or not MIN_REPS <= reps <= MAX_REPS:
        raise ConfigError(f"--reps must be {MIN_REPS:,} to {MAX_REPS:,} bootstrap resamples, got {reps!r} (a 95% "
                          "percentile interval reads its 2.5th and 97.5th percentiles, which need enough resamples; "
                          "more only cost memory and time)")
    if metric not in METRICS:
        raise ConfigError(f"--metric must be one of {', '.join(METRICS)}, got {metric!r}")
    if normalize not in NORMALIZE:
        raise ConfigError(f"--normalize must be one of {', '.join(NORMALIZE)}, got {normalize!r}")


def _ordered(table: pd.DataFrame, shown: list[str]) -> pd.DataFrame:
    """Per-env rows in the env order of the table, the variants in ``shown``'s order."""
    envs = {e: i for i, e in enumerate(dict.fromkeys(table["env"]))}
    rank = {v: i for i, v in enumerate(shown)}
    return table.sort_values(["env", "variant"], key=lambda c: c.map(envs if c.name == "env" else rank),
                             kind="stable").reset_index(drop=True)


def _curve_figures(results: pd.DataFrame, shown: list[str], baseline: str, look: dict[str, figures.Look], reps: int,
                   out: Path) -> list[str]:
    """The learning curves against env steps and training time, and each variant against the
    baseline when there are many; the names of the files."""
    steps = curves.compute(results, "step", shown, reps)
    pngs = []
    for x, computed, name in (("step", steps, "curves_steps.png"),
                              ("wall_s", curves.compute(results, "wall_s", shown, reps), "curves_wallclock.png")):
        if computed:  # none against training time where the results record no evaluation times
            curves.overlay(computed, x, shown, look, out / name)
            pngs.append(name)
    if steps and len(shown) - 1 > curves.MANY:
        curves.against_baseline(steps, "step", baseline, shown, look, out / "curves_vs_baseline.png")
        pngs.append("curves_vs_baseline.png")
    return pngs


def _across_envs(spec: Any, scores: pd.DataFrame, present: list[str], shown: list[str], baseline: str, reps: int,
               summary: dict[str, Any], look: dict[str, figures.Look], out: Path, normalize: str,
               report_envs: list[str]) -> list[str]:
    """The aggregate across envs of scores normalized as ``normalize`` says (:data:`NORMALIZE`),
    computed over every variant with finite scores (``present``) and shown for ``shown``: into ``summary``;
    its figures' names. ``report_envs``: the envs the report covers (the sweep's, or ``--envs``)."""
    refs = references(scores, spec.reference, spec.env_options(), spec.env_wrappers(), normalize)
    summary["references"], summary["normalize"] = refs, normalize
    usable = scores[scores.env.map(lambda e: refs[e]["usable"])]
    if normalize == "best-mean" and not usable.empty:  # the 1: the best mean over the runs aggregated
        usable = stats.aggregated_runs(usable, present)
        refs = summary["references"] = best_mean_over(usable, refs)
        usable = usable[usable.env.map(lambda e: refs[e]["usable"])]
    matrices, envs = stats.score_matrices(stats.normalize(usable, refs), present)
    summary["envs_left_out"] = stats.envs_left_out(scores, present, {e: r["usable"] for e, r in refs.items()},
                                                   "no variant's mean beats the random policy" if normalize ==
                                                   "best-mean" else "no run beats the random policy", report_envs)
    summary["runs_left_out"] = _runs_left_out(scores[scores.env.isin(envs)], matrices, envs)
    if not envs:
        summary["aggregate_skipped"] = "no env has finished runs of every variant and a usable reference"
        return []
    aggregate = stats.interval_estimates(matrices, reps)
    gains = stats.improvement(matrices, baseline, reps)
    seeds = {v: len(matrices[v]) for v in shown if v in matrices}
    summary.update(envs_aggregated=envs, seeds_aggregated=seeds,
                   aggregate={v: aggregate[v] for v in shown if v in aggregate},
                   improvement={v: gains[v] for v in shown if v in gains})
    summary["intervals"] = rank_tests.reliability(scores[scores.variant.isin(shown)], seeds)
    figures.aggregates(summary["aggregate"], look, out / "aggregate.png", "scores from a random policy (0) to the "
                       "best variant's mean (1)" if normalize == "best-mean" else "min-max normalized scores")
    figures.profiles(stats.profiles(matrices, reps), shown, look, out / "profiles.png")
    pngs = ["aggregate.png", "profiles.png"]
    if summary["improvement"]:
        figures.improvement(summary["improvement"], baseline, look, out / "improvement.png")
        pngs.append("improvement.png")
    return pngs


def _runs_left_out(scores: pd.DataFrame, matrices: dict[str, np.ndarray], envs: list[str]) -> list[str]:
    """The runs on aggregated envs that the aggregate leaves out: seeds that did not finish on
    every one of ``envs`` (rliable needs a full [runs, envs] matrix)."""
    kept = stats.aggregated_runs(scores, list(matrices)) if envs else scores.iloc[:0]
    dropped = scores.drop(kept.index)
    return [f"{r.variant} / {r.env} / seed {r.seed}" for r in dropped.sort_values(["variant", "env", "seed"])
            .itertuples()]


def _finish(out: Path, spec: Any, runs: pd.DataFrame, summary: dict[str, Any], pngs: list[str]) -> dict[str, Any]:
    write_json(out / "summary.json", _finite({MARKER: 1, **summary}))
    write_atomic(out / "report.md", _markdown(spec, runs, summary, pngs))
    remove_stale(out, pngs)
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


def _cost_unknown(runs: pd.DataFrame) -> list[str]:
    """A note naming the finished runs whose cost runs.csv leaves empty (their status file is damaged)."""
    unknown = runs[(runs.status == "done") & runs.get("error", pd.Series(dtype=str)).fillna("").astype(str)
                   .str.contains("cost columns are left empty")]
    if unknown.empty:
        return []
    return ["", "Left out of train s and steps/s (their status file is damaged, see runs.csv's error column): " +
            ", ".join(f"{r.variant} / {r.env} / seed {r.seed}" for r in unknown.itertuples())]


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, np.generic):
        return _finite(value.item())
    return value


RANK_METHOD = ("Mann-Whitney U per env, p-values from U's exact permutation distribution (ties as mid-ranks; "
               f"the normal approximation with tie and continuity corrections past {rank_tests.EXACT_MAX_RUNS} pooled "
               "runs, marked); across envs, the stratified test of the mean per-env P(X > Y) against its exact "
               "within-env permutation distribution (van Elteren's stratified test when every env has the same run "
               "counts); two-sided p-values")


def _interval(x: list[float], digits: int) -> str:
    """``point [low, high]``, marked degenerate when the interval has zero width (every bootstrap
    resample gave the same value: a sign of few or non-overlapping runs, not of certainty)."""
    text = f"{x[0]:.{digits}f} [{x[1]:.{digits}f}, {x[2]:.{digits}f}]"
    return text + " (degenerate)" if x[1] == x[2] else text


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _few_runs(s: dict[str, Any]) -> list[str]:
    """The warning at the top of a report whose (variant, env)s have too few runs for its intervals."""
    few = s.get("intervals", {})
    if few.get("intervals_reliable", True):
        return []
    return [f"**Few runs: the intervals are not reliable.** {few['fewest_runs']} run(s) per variant (on an env, or "
            f"on every env of the aggregate) at the fewest, below the {few['min_runs']} a bootstrap interval needs: resampling so few runs only reshuffles "
            "them (an IQM interval spans at most their range; runs that do not overlap give P(> baseline) the "
            "degenerate interval [1, 1]). Read the intervals as a description of these runs, not as a finding; "
            "the exact rank tests at the end say how much the runs can show.", ""]


def _markdown(spec: Any, runs: pd.DataFrame, s: dict[str, Any], pngs: list[str]) -> str:
    lines = [f"# Sweep report: {spec.name}", "",
             f"Metric: **{s['metric']}** return of each run ({METRICS[s['metric']]}); "
             f"baseline **{s['baseline']}**. Runs: " + ", ".join(f"{n} {k}" for k, n in s["runs"].items()) + ".", ""]
    if "variants_of_sweep" in s:
        lines += [f"Shown: the baseline and {', '.join(v for v in s['variants'] if v != s['baseline'])} "
                  f"({len(s['variants'])} of the sweep's {len(s['variants_of_sweep'])} variants with finished runs, "
                  "`--variants`). Every statistic is that of the report of every variant" +
                  (" on the environments below" if "envs_of_sweep" in s else "") + ": the per-env intervals and "
                  "rank tests are computed per variant, the aggregate across environments (its references, "
                  "environments and intervals) over every variant.", ""]
    if "envs_of_sweep" in s:
        envs = list(dict.fromkeys(r["env"] for r in s["per_env"]))
        if set(envs) == set(s["envs_of_sweep"]):
            lines += ["Environments: every one of the sweep's (`--envs` names them all).", ""]
        else:
            lines += [f"Environments: {', '.join(envs)} only (`--envs`; the sweep's: {', '.join(s['envs_of_sweep'])}). "
                      "Every statistic, the references and the aggregate included, is computed over these "
                      "environments' runs alone.", ""]
    lines += _few_runs(s)
    missing = runs[runs.status != "done"]
    if len(missing):
        lines += ["Not included (unfinished or failed):", ""]
        lines += [f"- {r.variant} / {r.env} / seed {r.seed}: {r.status}" + (f" — {r.error}" if isinstance(r.error, str)
                                                                          and r.error else "") for r in missing.itertuples()]
        lines.append("")
    if s.get("non_finite"):
        lines += [f"Left out of every statistic ({s['metric']} score NaN or inf): " + ", ".join(
            f"{r['variant']} / {r['env']} / seed {r['seed']}" for r in s["non_finite"]), ""]
    if s.get("aggregate_skipped"):
        lines += [f"No aggregate across environments: {s['aggregate_skipped']}.", *_left_out(s), ""]
    lines += ["## Per environment", "", "| env | variant | runs | mean ± s.e. | IQM [95% CI] | train s | steps/s |",
              "|---|---|---|---|---|---|---|"]
    for r in s["per_env"]:
        cost = s["cost"].get(r["variant"], {}).get(r["env"], {})
        lines.append(f"| {r['env']} | {r['variant']} | {r['runs']} | {_mean_se(r)} | "
                     f"{_interval([r['iqm'], r['iqm_low'], r['iqm_high']], 1)} | "
                     f"{cost.get('train_seconds', float('nan')):.1f} | "
                     f"{cost.get('steps_per_second', float('nan')):,.0f} |")
    lines += _cost_unknown(runs)
    if "pack_size" in runs and (runs["pack_size"].fillna(1) > 1).any():
        lines += ["", "Train s and steps/s are per run: a run trained in a pack of K seeds (one process) counts 1/K "
                      "of its pack's training seconds (runs.csv: pack_size, pack_train_seconds, "
                      "pack_steps_per_second)."]
    if "aggregate" in s:
        lines += _aggregate(s)
    if any("(degenerate)" in line for line in lines):
        lines += ["", "An interval marked *degenerate* has zero width: every bootstrap resample gave the same value "
                      "(few runs, runs that all score the same, or runs of two variants that do not overlap). It "
                      "is not a sign of certainty."]
    lines += _rank_tests(s.get("rank_tests"))
    lines += ["", "## Figures", ""] + [f"![{p}]({p})" for p in pngs]
    return "\n".join(lines) + "\n"


def _aggregate(s: dict[str, Any]) -> list[str]:
    scale = ("random policy 0, the best variant's mean 1" if s.get("normalize") == "best-mean"
             else "min-max: random policy 0, reference 1")
    lines = ["", f"## Across environments (normalized; {scale})", "",
             "References: " + "; ".join(f"{e}: random {r['random']:.1f}, reference {r['reference']:.1f} ({r['source']})"
                                        for e, r in s["references"].items()), "",
             f"Environments aggregated: {', '.join(s['envs_aggregated'])}.", *_left_out(s), "",
             "| variant | seeds | IQM | median | mean | optimality gap | P(> baseline) |",
             "|---|---|---|---|---|---|---|"]
    for v, a in s["aggregate"].items():
        p = s["improvement"].get(v)
        lines.append(f"| {v} | {s['seeds_aggregated'][v]} | {_interval(a['iqm'], 3)} | {_interval(a['median'], 3)} | "
                     f"{_interval(a['mean'], 3)} | {_interval(a['optimality_gap'], 3)} | "
                     f"{_interval(p, 3) if p else '—'} |")
    few = [c for c in s.get("intervals", {}).get("below_min_runs", []) if c["env"] in {*s["envs_aggregated"], "all"}]
    if not few:  # runs with few seeds on an env left out of the aggregate do not enter its intervals
        lines += ["", f"Intervals are 95% stratified-bootstrap CIs (rliable, {s['reps']:,} resamples). A variant is better than the baseline "
                      "with confidence when its P(> baseline) interval lies above 0.5; overlapping IQM intervals "
                      "alone do not show a difference."]
    else:
        lines += ["", f"Intervals are 95% stratified-bootstrap CIs (rliable, {s['reps']:,} resamples), computed from fewer than "
                      f"{s['intervals']['min_runs']} runs per variant and env: they are not reliable, and neither an "
                      "interval above 0.5 nor one apart from another shows a difference here. See the rank tests."]
    return lines


def _mean_se(r: dict[str, Any]) -> str:
    """``mean ± s.e.``, or the mean alone where one run gives no standard error."""
    return f"{r['mean']:.1f} ± {r['se']:.1f}" if r["se"] is not None and math.isfinite(r["se"]) else f"{r['mean']:.1f}"


def _left_out(s: dict[str, Any]) -> list[str]:
    """The line naming the envs the aggregate leaves out, and why (none when it leaves none out)."""
    out = s.get("envs_left_out")
    lines = ["Left out of the aggregate: " + "; ".join(f"{e} ({why})" for e, why in out.items()) + "."] if out else []
    if s.get("runs_left_out"):
        lines.append("Runs left out of the aggregate (their seed did not finish on every env aggregated): " +
                     ", ".join(s["runs_left_out"]) + ".")
    return lines


def _rank_tests(t: dict[str, Any] | None) -> list[str]:
    if not t or not t["per_env"]:
        return []
    lines = ["", f"## Rank tests against {t['baseline']}", "", t["method"] + ". \"smallest p\" is the smallest "
             "two-sided p-value these run counts allow, whatever the returns.", "",
             "| env | variant | runs (baseline's) | U | P(X > Y) | p | smallest p |", "|---|---|---|---|---|---|---|"]
    mark = lambda r: "" if r["method"] == rank_tests.EXACT else " (normal approx.)"  # noqa: E731
    for r in t["per_env"]:
        lines.append(f"| {r['env']} | {r['variant']} | {r['runs']} ({r['baseline_runs']}) | {r['statistic']:.1f} | "
                     f"{r['p_improvement']:.3f} | {_p(r['p_value'])}{mark(r)} | {_p(r['min_p_value'])} |")
    if any(len(c["envs"]) > 1 for c in t["combined"].values()):
        lines += ["", "Across environments (stratified; each over the envs where it and the baseline both have "
                  "runs):", "", "| variant | envs | mean P(X > Y) | p | smallest p |",
                  "|---|---|---|---|---|"]
        lines += [f"| {v} | {len(c['envs'])} | {c['p_improvement']:.3f} | {_p(c['p_value'])}{mark(c)} | "
                  f"{_p(c['min_p_value'])} |" for v, c in t["combined"].items()]
    tests = t["per_env"] + list(t["combined"].values())
    if any(r["min_p_value"] > 0.05 for r in tests):
        lines += ["", "Where \"smallest p\" is above 0.05, no outcome of these runs, however far apart, can give a "
                      "two-sided p-value below 0.05: more seeds are needed to show a difference at that level."]
    return lines
