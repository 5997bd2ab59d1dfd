"""Reports under hostile use: NaN and inf returns in the curves, --out folders that hold other
files or an earlier report, bootstrap resample counts out of range, envs left out of the aggregate
and wording of the report's own errors."""

import math

import numpy as np
import pandas as pd

from rlkit.ablation import curves
from rlkit.ablation.report import write_report
from tests.ablation.test_hostile_sweeps import fake_sweep, strict_json

REPS = 200


def test_a_nan_or_inf_return_leaves_its_run_out_of_the_curves_not_the_variant(tmp_path, monkeypatch):
    finals = {("a", "CartPole-v1", s): [100.0, 200.0 + s] for s in (1, 2, 3)}
    finals.update({("b", "CartPole-v1", 1): [300.0, math.nan], ("b", "CartPole-v1", 2): [300.0, math.inf],
                   ("b", "CartPole-v1", 3): [100.0, 250.0]})
    out = fake_sweep(tmp_path, finals)
    labels = []
    monkeypatch.setattr(curves, "legend_below", lambda fig, handles, names: labels.extend(names))
    summary = strict_json(write_report(str(out), reps=REPS)["summary"])
    assert next(r["runs"] for r in summary["per_env"] if r["variant"] == "b") == 1
    assert "b (1 seed)" in labels and "a (3 seeds)" in labels  # curves_steps.png and curves_wallclock.png
    drawn = curves.compute(pd.read_csv(out / "results.csv"), "step", ["a", "b"], REPS)
    b = drawn[("CartPole-v1", "b")]
    assert b.seeds == 1 and np.isfinite(b.iqm).all() and b.iqm[0] == 100.0 and b.iqm[-1] == 250.0
    assert drawn[("CartPole-v1", "a")].seeds == 3
