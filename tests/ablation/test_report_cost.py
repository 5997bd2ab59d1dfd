"""The report's cost columns are per variant and env (an env's cost is never averaged with another's)."""

import pandas as pd

from rlkit.ablation.report import _cost, _markdown


def test_cost_is_per_variant_and_env_and_reaches_the_table():
    runs = pd.DataFrame({"variant": ["ppo", "ppo", "ppo", "hp3o"], "env": ["A", "A", "B", "A"],
                         "status": ["done", "done", "done", "failed"], "train_seconds": [10.0, 20.0, 100.0, 5.0],
                         "steps_per_second": [1000.0, 3000.0, 400.0, 9.0], "seed": [1, 2, 1, 1], "error": ["", "", "", "x"]})
    cost = _cost(runs)
    assert cost == {"ppo": {"A": {"train_seconds": 15.0, "steps_per_second": 2000.0},
                            "B": {"train_seconds": 100.0, "steps_per_second": 400.0}}}  # failed runs excluded
    row = dict(mean=1.0, se=0.0, iqm=1.0, iqm_low=1.0, iqm_high=1.0, runs=1, variant="ppo")
    summary = {"metric": "final", "baseline": "ppo", "runs": {"done": 3}, "cost": cost,
               "per_env": [{**row, "env": "A"}, {**row, "env": "B"}]}
    spec = type("Spec", (), {"name": "t"})()
    text = _markdown(spec, runs[runs.status == "done"], summary, [])
    assert "| A | ppo | 1 | 1.0 ± 0.0 | 1.0 [1.0, 1.0] (degenerate) | 15.0 | 2,000 |" in text
    assert "| B | ppo | 1 | 1.0 ± 0.0 | 1.0 [1.0, 1.0] (degenerate) | 100.0 | 400 |" in text
