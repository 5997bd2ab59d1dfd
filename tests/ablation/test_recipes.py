"""Every paper recipe in experiments/ is a valid spec and its smoke budget runs (CI runs them)."""

from pathlib import Path

import pytest

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
