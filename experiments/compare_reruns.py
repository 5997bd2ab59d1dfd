"""A committed report beside its rerun: how many evaluations came out equal, and every statistic a
reading quotes (per env IQM, the aggregate IQM and P(> baseline)) committed -> rerun.

    python experiments/compare_reruns.py COMMITTED_DIR RERUN_DIR

Each folder holds a report's ``results.csv`` and ``summary.json`` (as ``experiments/*/`` and
``experiments/*/reruns/*`` do). The tables are printed as Markdown.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

KEYS = ["variant", "env", "seed", "step"]


def equal_evaluations(old: pd.DataFrame, new: pd.DataFrame) -> str:
    """'N of M' evaluations (variant, env, seed, step) of the committed run whose mean return the
    rerun repeats exactly, for rlkit and for the baselines."""
    both = old.merge(new, on=KEYS, how="left", suffixes=("", "_new"), indicator=True)
    a, b = both["eval_return_mean"], both["eval_return_mean_new"]
    same = (a == b) | (a.isna() & b.isna() & (both["_merge"] == "both"))  # a NaN the rerun repeats is equal
    mine = both["kind"] == "rlkit"
    text = f"{int(same.sum())} of {len(both)}"
    if (~mine).any():
        text += f" (rlkit {int(same[mine].sum())} of {int(mine.sum())}, baselines {int(same[~mine].sum())} of {int((~mine).sum())})"
    return text


def interval(value: list[float] | None, digits: int) -> str:
    return "—" if not value else f"{value[0]:.{digits}f} [{value[1]:.{digits}f}, {value[2]:.{digits}f}]"


def per_env(old: dict, new: dict) -> list[str]:
    rows = ["| env | variant | committed IQM | rerun IQM |", "|---|---|---|---|"]
    rerun = {(r["env"], r["variant"]): r for r in new["per_env"]}
    for r in old["per_env"]:
        n = rerun.get((r["env"], r["variant"]))
        after = interval([n["iqm"], n["iqm_low"], n["iqm_high"]], 1) if n else "—"
        rows.append(f"| {r['env']} | {r['variant']} | {interval([r['iqm'], r['iqm_low'], r['iqm_high']], 1)} | {after} |")
    return rows


def aggregate(old: dict, new: dict) -> list[str]:
    if "aggregate" not in old:
        return []
    rows = ["", f"Across envs (baseline {old.get('baseline')}):", "",
            "| variant | committed IQM | rerun IQM | committed P(> baseline) | rerun P(> baseline) |", "|---|---|---|---|---|"]
    for v, a in old["aggregate"].items():
        b = new.get("aggregate", {}).get(v)
        rows.append(f"| {v} | {interval(a['iqm'], 3)} | {interval(b['iqm'], 3) if b else '—'} | "
                    f"{interval(old.get('improvement', {}).get(v), 2)} | {interval(new.get('improvement', {}).get(v), 2)} |")
    return rows


DEFAULTS = {"metric": "final", "baseline": None}
"""What a summary.json written before a field existed meant by leaving it out."""


RECORDED_LATER = ("reps", "variants")
"""Settings compared only where both summaries record them."""


def settings(summary: dict) -> dict:
    """What a report was made with: metric, baseline, normalization (a summary from before the
    field: min-max where it has an aggregate, else none), resamples and variants where recorded,
    and the envs of its per-env table."""
    made = {k: summary.get(k, v) for k, v in DEFAULTS.items()}
    made["normalize"] = summary.get("normalize", "minmax" if "aggregate" in summary or "aggregate_skipped" in summary
                                    else "none")
    made["reps"] = summary.get("reps")
    made["variants"] = sorted(summary.get("variants_of_sweep", summary.get("variants")) or []) or None
    made["shown"] = sorted(summary["variants"]) if "variants_of_sweep" in summary else None
    made["envs"] = sorted({r["env"] for r in summary["per_env"]})
    return made


def envs_hint(committed: list[str], rerun: list[str]) -> str:
    """How to report both on the same envs: the committed envs where the rerun has them all, else the
    envs they share (naming the ones the rerun lacks)."""
    lacking = [e for e in committed if e not in rerun]
    if not lacking:
        return f"; rlkit report --envs {','.join(committed)} reports on the committed envs"
    common = [e for e in committed if e in rerun]
    both = f"; rlkit report --envs {','.join(common)} on both reports on the envs they share" if common else ""
    return f"; the rerun has no runs on {', '.join(lacking)}{both}"


def fail(message: str) -> None:
    print(f"compare_reruns: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def read(folder: Path) -> tuple[pd.DataFrame, dict]:
    try:
        results, summary = pd.read_csv(folder / "results.csv"), json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        fail(f"{folder}: {exc}")
    if not isinstance(summary, dict) or not isinstance(summary.get("per_env"), list) or not set(KEYS) <= set(results):
        fail(f"{folder}: not a report's summary.json and results.csv")
    return results, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("committed", type=Path, help="the committed report's folder")
    parser.add_argument("rerun", type=Path, help="the rerun's folder")
    args = parser.parse_args()
    (old, old_s), (new, new_s) = read(args.committed), read(args.rerun)
    made = settings(old_s), settings(new_s)
    differ = [k for k in made[0] if made[0][k] != made[1][k] and (k not in RECORDED_LATER or None not in (made[0][k], made[1][k]))]
    if differ:
        hint = envs_hint(made[0]["envs"], made[1]["envs"]) if "envs" in differ else ""
        fail(f"the two reports differ in {', '.join(differ)}: their statistics are not comparable (report the "
             f"rerun as the committed report was{hint})")
    lines = [f"Evaluations equal to the committed run's: {equal_evaluations(old, new)}.", "",
             *per_env(old_s, new_s), *aggregate(old_s, new_s)]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
