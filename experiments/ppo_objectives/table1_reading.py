"""PPO's Table 1 (Schulman et al. 2017) beside rlkit's: each setting's average normalized score
(the paper's statistic) with its interval, rliable's IQM, P(> clip 0.2), the per-task normalized
means, and how the settings' order agrees with the paper's.

    rlkit report sweeps/ppo_objectives_table1 --metric train100 --normalize best-mean --out REPORT
    python experiments/ppo_objectives/table1_reading.py REPORT

REPORT is the folder of that report (its ``summary.json``). The paper sets "the best result" to 1
on each task: ``best-mean`` reads it as the best setting's mean, ``minmax`` as the best run (a report
made with ``--normalize minmax``). The tables are printed as Markdown,
after what the report covers: its tasks, runs per setting, and the tasks, runs and settings it
leaves out; after them, the settings' orders compared. Scores are compared at the two decimals
printed, the paper's precision.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from scipy.stats import kendalltau, rankdata

PAPER = {"noclip": -0.39, "clip0.1": 0.76, "clip0.2": 0.82, "clip0.3": 0.70, "kladapt0.003": 0.68,
         "kladapt0.01": 0.74, "kladapt0.03": 0.71, "klfix0.3": 0.62, "klfix1": 0.71, "klfix3": 0.72, "klfix10": 0.69}
"""Table 1 of Schulman et al. (2017): the average normalized score of each setting over 21 runs."""
TASKS = ["HalfCheetah-v5", "Hopper-v5", "InvertedDoublePendulum-v5", "InvertedPendulum-v5", "Reacher-v5",
         "Swimmer-v5", "Walker2d-v5"]
"""The paper's seven tasks, in Gymnasium's v5 versions."""
NORMALIZED = {"best-mean": "the best setting's mean on the task 1", "minmax": "the best run on the task 1"}
"""The two readings of the paper's "the best result was set to 1" that rlkit report computes."""
GROUPS = {"clipping": ["clip0.1", "clip0.2", "clip0.3"], "adaptive KL": ["kladapt0.003", "kladapt0.01", "kladapt0.03"],
          "fixed KL": ["klfix0.3", "klfix1", "klfix3", "klfix10"]}


class Refused(Exception):
    """A summary the reading cannot use; its text is the one-line reason."""


def need(ok: bool, message: str) -> None:
    if not ok:
        raise Refused(message)


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def triple(x: Any) -> bool:
    """A ``[point, low, high]`` of finite numbers."""
    return isinstance(x, list) and len(x) == 3 and all(is_number(v) for v in x)


def check_kind(s: Any, where: str) -> None:
    need(isinstance(s, dict), f"{where} is not a report's summary")
    need(s.get("metric") == "train100" and s.get("normalize") in NORMALIZED and "aggregate" in s,
         f"{where} is not a report made with --metric train100 --normalize best-mean (or minmax), with an aggregate "
         "across envs: the paper's statistic is not in it")
    need(s.get("baseline") == "clip0.2",
         f"{where} compares with {s.get('baseline')!r}; the reading's P(> clip0.2) needs --baseline clip0.2")


def check_fields(s: dict, where: str) -> None:
    """Every field the reading uses has the type and size a report writes; numbers are finite."""
    agg, imp, envs, refs, per_env = (s.get(k) for k in ("aggregate", "improvement", "envs_aggregated", "references",
                                                          "per_env"))
    need(isinstance(agg, dict) and all(isinstance(a, dict) and triple(a.get("mean")) and triple(a.get("iqm"))
                                       for a in agg.values()),
         f"{where}: aggregate needs each setting's finite mean and iqm as [point, low, high]")
    need(bool(set(PAPER) & set(agg)), f"{where} aggregates none of the paper's settings ({', '.join(PAPER)})")
    need(isinstance(imp, dict) and all(triple(v) for v in imp.values()),
         f"{where}: improvement needs each setting's finite P(> clip0.2) as [point, low, high]")
    need(isinstance(envs, list) and bool(envs) and all(isinstance(e, str) for e in envs) and len(set(envs)) == len(envs),
         f"{where}: envs_aggregated needs the aggregate's env names, each once")
    need(isinstance(refs, dict) and all(isinstance(refs.get(e), dict) and is_number(refs[e].get("random"))
                                        and is_number(refs[e].get("reference"))
                                        and refs[e]["reference"] != refs[e]["random"] for e in envs),
         f"{where}: references needs a finite random and a different finite reference score for each aggregated env")
    need(isinstance(per_env, list) and all(isinstance(r, dict) and isinstance(r.get("variant"), str)
                                           and isinstance(r.get("env"), str) and is_number(r.get("mean"))
                                           for r in per_env),
         f"{where}: per_env needs rows of variant, env and a finite mean")
    keys = [(r["variant"], r["env"]) for r in per_env]
    need(len(set(keys)) == len(keys), f"{where}: per_env lists a setting on an env twice")
    need(isinstance(s.get("runs_left_out", []), list) and isinstance(s.get("envs_left_out", {}), dict)
         and isinstance(s.get("seeds_aggregated", {}), dict) and isinstance(s.get("intervals", {}), dict),
         f"{where}: runs_left_out, envs_left_out, seeds_aggregated or intervals is not what a report writes")


def load(folder: Path) -> dict:
    where = str(folder)
    try:
        s = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        raise Refused(f"{where}: {exc}") from None
    check_kind(s, where)
    check_fields(s, where)
    return s


def shown(x: float) -> float:
    """A score as printed: two decimals, the paper's precision; equal printed scores tie."""
    return round(x, 2)


def two(x: float) -> str:
    """``x`` at two decimals, a value that rounds to zero without a sign."""
    return f"{x:.2f}".replace("-0.00", "0.00")


def interval(value: list[float] | None) -> str:
    if not value:
        return "—"
    text = f"{two(value[0])} [{two(value[1])}, {two(value[2])}]"
    return text + " (degenerate)" if value[1] == value[2] else text


def ranks(scores: dict[str, float]) -> dict[str, str]:
    """1 for the highest printed score; tied printed scores share their mean rank (2.5)."""
    names = list(scores)
    return {v: f"{r:g}" for v, r in zip(names, rankdata([-shown(scores[v]) for v in names]))}


def ours(s: dict) -> dict[str, float]:
    return {v: a["mean"][0] for v, a in s["aggregate"].items() if v in PAPER}


def coverage(s: dict) -> list[str]:
    """What the aggregate covers against the paper's 7 tasks x 3 seeds, and what it leaves out."""
    envs, mine = s["envs_aggregated"], ours(s)
    seeds = {v: s.get("seeds_aggregated", {}).get(v) for v in PAPER if v in mine}
    counts = sorted({n for n in seeds.values() if isinstance(n, int)})
    per = (f"{counts[0]} seeds x {len(envs)} tasks = {counts[0] * len(envs)} runs per setting" if len(counts) == 1
           else "seeds per setting: " + ", ".join(f"{v} {n}" for v, n in seeds.items()))
    out = [f"Tasks: {', '.join(envs)} ({len(envs)} of the paper's 7); {per} (the paper's: 3 seeds x 7 tasks = 21).",
           f"Normalized per task: a random policy 0, {NORMALIZED[s['normalize']]} (--normalize {s['normalize']})."]
    left = s.get("envs_left_out", {})
    missing = [e for e in TASKS if e not in envs]
    of_sweep = s.get("envs_of_sweep")  # written when --envs chose the report's envs
    why = {e: left.get(e) or ("no finished run" if not isinstance(of_sweep, list) else
                              "left out by --envs" if e in of_sweep else "not in the sweep") for e in missing}
    if missing:
        out.append("Not aggregated: " + "; ".join(f"{e} ({why[e]})" for e in missing) + ".")
    if [v for v in PAPER if v not in mine]:
        out.append(f"The paper's settings not in this report: {', '.join(v for v in PAPER if v not in mine)}.")
    if s.get("runs_left_out"):
        out.append(f"Runs left out of the aggregate (a seed must finish on every task): {', '.join(map(str, s['runs_left_out']))}. "
                   "The per-task means include them, so they can differ from the aggregate's and exceed 1.")
    few = s.get("intervals", {})
    if few.get("intervals_reliable") is False:
        out.append(f"Few runs: {few.get('fewest_runs')} per setting and task at the fewest, below the "
                   f"{few.get('min_runs')} a bootstrap interval needs; the intervals describe these runs, they are "
                   "not a finding (report.md's rank tests say what the runs can show).")
    return out


def aggregate_table(s: dict) -> list[str]:
    mine = ours(s)
    paper_rank, our_rank = ranks({v: PAPER[v] for v in mine}), ranks(mine)
    rows = ["| setting | paper | rlkit: average normalized score | IQM | P(> clip0.2) | "
            "rank among these settings: paper / rlkit |", "|---|---|---|---|---|---|"]
    for v in PAPER:
        if v in mine:
            a = s["aggregate"][v]
            rows.append(f"| {v} | {PAPER[v]:.2f} | {interval(a['mean'])} | {interval(a['iqm'])} | "
                        f"{interval(s['improvement'].get(v))} | {paper_rank[v]} / {our_rank[v]} |")
    return rows


def per_task(s: dict) -> list[str]:
    """Each setting's mean score on each aggregated task, normalized by the aggregate's references."""
    refs = s["references"]
    envs = s["envs_aggregated"]
    rows = ["| setting | " + " | ".join(e.removesuffix("-v5") for e in envs) + " |", "|---|" + "---|" * len(envs)]
    means = {(r["variant"], r["env"]): r["mean"] for r in s["per_env"]}
    absent = []
    for v in PAPER:
        if all((v, e) in means for e in envs):
            cells = [(means[(v, e)] - refs[e]["random"]) / (refs[e]["reference"] - refs[e]["random"]) for e in envs]
            rows.append(f"| {v} | " + " | ".join(two(c) for c in cells) + " |")
        elif v in s["aggregate"]:
            absent.append(v)
    if absent:
        rows += ["", f"Without a mean on every task, left out of this table: {', '.join(absent)}."]
    return rows


def tie_word(paper: list[float], mine: list[float]) -> str:
    sides = [side for side, values in (("the paper's", paper), ("rlkit's", mine)) if len(set(values)) == 1]
    return f"undefined ({' and '.join(sides)} scores all tie)"


def best(scores: dict[str, float]) -> str:
    top = max(scores.values())
    return " = ".join(v for v, x in scores.items() if x == top)


def orders(s: dict) -> list[str]:
    """Kendall's tau-b between the paper's and rlkit's printed scores, overall and per group."""
    mine = {v: shown(x) for v, x in ours(s).items()}
    out = []
    clipped_or_penalized = [v for v in PAPER if v != "noclip"]  # without the row last in both
    for name, members in [("all settings", list(PAPER)), ("all but noclip", clipped_or_penalized), *GROUPS.items()]:
        here = [v for v in members if v in mine]
        if len(here) < 2:
            continue
        paper, rlkit = [PAPER[v] for v in here], [mine[v] for v in here]
        tau = kendalltau(paper, rlkit).statistic
        said = f"{tau:.2f}" if not math.isnan(tau) else tie_word(paper, rlkit)
        out.append(f"- {name}: Kendall's tau-b {said} over {len(here)}; best in the paper "
                   f"{best({v: PAPER[v] for v in here})}, in rlkit {best({v: mine[v] for v in here})}")
    return out


def pairs(s: dict) -> list[str]:
    """The pairs of settings whose printed scores the paper and rlkit order oppositely, and those
    equal on one side only."""
    mine = {v: shown(x) for v, x in ours(s).items()}
    here = [v for v in PAPER if v in mine]
    swapped, tied = [], []
    for i, a in enumerate(here):
        for b in here[i + 1:]:
            theirs, ours_ = PAPER[a] - PAPER[b], mine[a] - mine[b]
            if theirs * ours_ < 0:
                swapped.append(f"{a} / {b}")
            elif (theirs == 0) != (ours_ == 0):
                tied.append(f"{a} / {b}")
    total = len(here) * (len(here) - 1) // 2
    return [f"- pairs in the opposite order: {len(swapped)} of {total}" + (f" ({', '.join(swapped)})" if swapped else ""),
            f"- pairs equal on one side only: {len(tied)} of {total}" + (f" ({', '.join(tied)})" if tied else "")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="the folder of rlkit report's output")
    args = parser.parse_args()
    try:
        s = load(args.report)
    except Refused as exc:
        print(f"table1_reading: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print("\n".join([*coverage(s), "", *aggregate_table(s), "", *per_task(s), "", *orders(s), *pairs(s)]))


if __name__ == "__main__":
    main()
