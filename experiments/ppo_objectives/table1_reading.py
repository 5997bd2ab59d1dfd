"""PPO's Table 1 (Schulman et al. 2017) beside rlkit's: each setting's average normalized score
(the paper's statistic) with its interval, rliable's IQM, P(> clip 0.2), the per-task normalized
means, and how the settings' order agrees with the paper's.

    rlkit report sweeps/ppo_objectives_table1 --metric train100 --normalize best-mean --out REPORT
    python experiments/ppo_objectives/table1_reading.py REPORT

REPORT is the folder of that report (its ``summary.json``). The tables are printed as Markdown.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import math

from scipy.stats import kendalltau, rankdata

PAPER = {"noclip": -0.39, "clip0.1": 0.76, "clip0.2": 0.82, "clip0.3": 0.70, "kladapt0.003": 0.68,
         "kladapt0.01": 0.74, "kladapt0.03": 0.71, "klfix0.3": 0.62, "klfix1": 0.71, "klfix3": 0.72, "klfix10": 0.69}
"""Table 1 of Schulman et al. (2017): the average normalized score of each setting over 21 runs."""
GROUPS = {"clipping": ["clip0.1", "clip0.2", "clip0.3"], "adaptive KL": ["kladapt0.003", "kladapt0.01", "kladapt0.03"],
          "fixed KL": ["klfix0.3", "klfix1", "klfix3", "klfix10"]}


def fail(message: str) -> None:
    print(f"table1_reading: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def interval(value: list[float] | None) -> str:
    return "—" if not value else f"{value[0]:.2f} [{value[1]:.2f}, {value[2]:.2f}]"


def ranks(scores: dict[str, float]) -> dict[str, str]:
    """1 for the highest score; tied scores share their mean rank (2.5)."""
    names = list(scores)
    return {v: f"{r:g}" for v, r in zip(names, rankdata([-scores[v] for v in names]))}


def aggregate_table(s: dict) -> list[str]:
    ours = {v: a["mean"][0] for v, a in s["aggregate"].items() if v in PAPER}
    paper_rank, our_rank = ranks({v: PAPER[v] for v in ours}), ranks(ours)
    rows = ["| setting | paper | rlkit: average normalized score | IQM | P(> clip0.2) | rank: paper / rlkit |",
            "|---|---|---|---|---|---|"]
    for v in PAPER:
        if v in ours:
            a = s["aggregate"][v]
            rows.append(f"| {v} | {PAPER[v]:.2f} | {interval(a['mean'])} | {interval(a['iqm'])} | "
                        f"{interval(s['improvement'].get(v))} | {paper_rank[v]} / {our_rank[v]} |")
    return rows


def per_task(s: dict) -> list[str]:
    """Each setting's mean score on each task, normalized as the aggregate is."""
    refs = s["references"]
    envs = list(s["envs_aggregated"])
    rows = ["| setting | " + " | ".join(e.removesuffix("-v5") for e in envs) + " |", "|---|" + "---|" * len(envs)]
    means = {(r["variant"], r["env"]): r["mean"] for r in s["per_env"]}
    for v in PAPER:
        if all((v, e) in means for e in envs):
            cells = [(means[(v, e)] - refs[e]["random"]) / (refs[e]["reference"] - refs[e]["random"]) for e in envs]
            rows.append(f"| {v} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    return rows


def orders(s: dict) -> list[str]:
    """Kendall's tau between the paper's and rlkit's order of the settings, overall and per group."""
    ours = {v: a["mean"][0] for v, a in s["aggregate"].items() if v in PAPER}
    out = []
    for name, members in [("all settings", list(PAPER)), *GROUPS.items()]:
        here = [v for v in members if v in ours]
        if len(here) < 2:
            continue
        tau = kendalltau([PAPER[v] for v in here], [ours[v] for v in here]).statistic  # tau-b: ties counted
        said = f"{tau:.2f}" if not math.isnan(tau) else "undefined (rlkit's scores all tie)"
        top = max(ours[v] for v in here)
        best_ours = " = ".join(v for v in here if ours[v] == top)
        out.append(f"- {name}: Kendall's tau {said} over {len(here)}; best in the paper "
                   f"{max(here, key=PAPER.get)}, in rlkit {best_ours}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="the folder of rlkit report's output")
    args = parser.parse_args()
    try:
        s = json.loads((args.report / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        fail(f"{args.report}: {exc}")
    if not isinstance(s, dict):
        fail(f"{args.report}/summary.json is not a report's summary")
    if s.get("metric") != "train100" or s.get("normalize") != "best-mean" or "aggregate" not in s:
        fail(f"{args.report} is not a report made with --metric train100 --normalize best-mean, with an aggregate "
             "across envs: the paper's statistic is not in it")
    if s.get("baseline") != "clip0.2":
        fail(f"{args.report} compares with {s.get('baseline')!r}; the reading's P(> clip0.2) needs --baseline clip0.2")
    if not set(PAPER) & set(s["aggregate"]):
        fail(f"{args.report} aggregates none of the paper's settings ({', '.join(PAPER)})")
    print("\n".join([*aggregate_table(s), "", f"Tasks: {', '.join(s['envs_aggregated'])}.", "",
                     *per_task(s), "", *orders(s)]))


if __name__ == "__main__":
    main()
