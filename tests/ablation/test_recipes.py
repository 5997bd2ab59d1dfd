"""Every paper recipe in experiments/ is a valid spec and its smoke budget runs (CI runs them)."""

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlkit.ablation import stats
from rlkit.ablation.spec import load_spec
from rlkit.ablation.sweep import run_sweep

RECIPES = sorted(str(p) for p in (Path(__file__).parents[2] / "experiments").rglob("*.toml"))


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: Path(p).relative_to(Path(p).parents[1]).as_posix())
def test_recipe_is_valid_at_full_budget(recipe):
    spec = load_spec(recipe)
    assert len(spec.runs) >= 5 * len(spec.envs) and spec.baseline in spec.variants


# A real Atari game's smoke budget (two runs of a Nature CNN per library) is a slow test.
SMOKE = [pytest.param(r, marks=pytest.mark.slow) if "atari" in Path(r).name else r for r in RECIPES]


@pytest.mark.parametrize("recipe", SMOKE, ids=lambda p: Path(p).relative_to(Path(p).parents[1]).as_posix())
def test_recipe_smoke_budget_runs(recipe, tmp_path):
    summary = run_sweep(recipe, str(tmp_path / "smoke"), workers=2, budget="smoke", progress=False)
    assert summary.done == summary.total and summary.failed == 0
    _report_has_every_run_of_the_spec(load_spec(recipe, "smoke"), tmp_path / "smoke")


def _report_has_every_run_of_the_spec(spec, sweep):
    """The tables the report reads hold every (variant, env, seed) of the spec, done and evaluated,
    and the report's per-env table (its statistics, without the figures) a finite IQM over every
    seed for each variant on each env."""
    planned = {(r.variant, r.env, r.seed) for r in spec.runs}
    runs = pd.read_csv(sweep / "runs.csv")
    assert set(zip(runs.variant, runs.env, runs.seed)) == planned and set(runs.status) == {"done"}
    final = stats.final_scores(pd.read_csv(sweep / "results.csv"))
    assert set(zip(final.variant, final.env, final.seed)) == planned
    assert {v for v, _, _ in planned} == set(spec.variants) and {e for _, e, _ in planned} == set(spec.envs)
    table = stats.per_env_table(final, reps=20)
    seeds = Counter((v, e) for v, e, _ in planned)
    assert dict(zip(zip(table.variant, table.env), table.runs)) == seeds and np.isfinite(table.iqm).all(), table
