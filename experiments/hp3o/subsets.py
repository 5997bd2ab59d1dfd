"""The per-env and without-Walker2d figures of experiments/hp3o/results_mujoco/README.md, from the
report's own final returns and references: P(variant > PPO) per env, and over the envs but
Walker2d (min-max normalized by the report's references), with the report's 20,000-resample
stratified bootstrap.

    python experiments/hp3o/subsets.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from rlkit.ablation.stats import REPS, final_scores, improvement, normalize, score_matrices

HERE = Path(__file__).parent / "results_mujoco"


def rounded(found: dict[str, list]) -> dict[str, list[float]]:
    return {v: [round(x, 3) for x in p] for v, p in found.items()}


def main() -> None:
    summary = json.loads((HERE / "summary.json").read_text())
    scores = final_scores(pd.read_csv(HERE / "results.csv"))
    baseline, variants = summary["baseline"], sorted(scores.variant.unique())
    for env in sorted(scores.env.unique()):
        matrices, _ = score_matrices(scores[scores.env == env], variants)
        print(env, rounded(improvement(matrices, baseline, REPS)))
    matrices, envs = score_matrices(normalize(scores[scores.env != "Walker2d-v5"], summary["references"]), variants)
    print("without Walker2d", envs, rounded(improvement(matrices, baseline, REPS)))


if __name__ == "__main__":
    main()
