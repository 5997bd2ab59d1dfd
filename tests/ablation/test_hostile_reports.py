"""Reports under hostile use: NaN and inf returns in the curves, --out folders that hold other
files or an earlier report, bootstrap resample counts out of range, envs left out of the aggregate
and wording of the report's own errors."""

import json
import math

import numpy as np
import pandas as pd

from rlkit.ablation import curves
from rlkit.ablation.report import write_report
from rlkit.ablation.report_dir import MARKER
from rlkit.cli import main
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


def two_variants(tmp_path):
    return fake_sweep(tmp_path, {(v, "CartPole-v1", s): [100.0, 200.0 + s + 10 * (v == "b")]
                                 for v in ("a", "b") for s in (1, 2, 3)})


def test_out_refuses_a_folder_of_other_files_and_changes_nothing(tmp_path, capsys):
    sweep, mine = two_variants(tmp_path), tmp_path / "mine"
    mine.mkdir()
    (mine / "report.md").write_text("my notes")
    (mine / "per_env.png").write_bytes(b"my figure")
    assert main(["report", str(sweep), "--out", str(mine), "--reps", str(REPS)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rlkit: error: ") and "not an rlkit report" in err
    assert sorted(p.name for p in mine.iterdir()) == ["per_env.png", "report.md"]
    assert (mine / "report.md").read_text() == "my notes" and (mine / "per_env.png").read_bytes() == b"my figure"


def test_rewriting_a_report_removes_the_figures_the_new_one_does_not_draw(tmp_path, capsys):
    sweep = two_variants(tmp_path)
    for out in (tmp_path / "new", sweep / "report"):  # --out, then the sweep's own report folder
        where = ["--out", str(out)] if out.name == "new" else []
        assert main(["report", str(sweep), "--reps", str(REPS), *where]) == 0
        assert (out / "aggregate.png").is_file()
        assert main(["report", str(sweep), "--reps", str(REPS), "--normalize", "none", *where]) == 0
        drawn = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["figures"]
        assert sorted(p.name for p in out.glob("*.png")) == sorted(drawn) and "aggregate.png" not in drawn
        assert MARKER in strict_json(out / "summary.json")


def test_the_aggregate_names_the_envs_it_aggregates_and_those_it_leaves_out(tmp_path):
    envs = ("CartPole-v1", "Acrobot-v1")
    finals = {(v, e, s): [100.0 + s + 10 * (v == "b")] for v in ("a", "b") for e in envs for s in (1, 2, 3)
              if (v, e) != ("b", "Acrobot-v1")}  # b never finished on Acrobot
    report = write_report(str(fake_sweep(tmp_path, finals, envs=envs)), reps=REPS)
    summary, text = strict_json(report["summary"]), open(report["report"]).read()
    assert summary["envs_aggregated"] == ["CartPole-v1"]
    assert summary["envs_left_out"] == {"Acrobot-v1": "no finished runs of b"}
    assert "Environments aggregated: CartPole-v1." in text
    assert "Left out of the aggregate: Acrobot-v1 (no finished runs of b)." in text


def test_report_wording_an_unknown_baseline(tmp_path, capsys):
    sweep = fake_sweep(tmp_path, {("a", "CartPole-v1", 1): [100.0], ("b", "CartPole-v1", 1): [150.0]})
    assert main(["report", str(sweep), "--baseline", "nosuch", "--reps", str(REPS)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "there is no variant 'nosuch'" in err and "choose from a, b" in err


def test_report_wording_a_single_run_has_no_standard_error(tmp_path):
    sweep = fake_sweep(tmp_path, {("a", "CartPole-v1", 1): [100.0], ("b", "CartPole-v1", 1): [150.0]})
    text = open(write_report(str(sweep), reps=REPS)["report"]).read()
    rows = [line for line in text.splitlines() if line.startswith("| CartPole-v1 |")]
    assert "| CartPole-v1 | a | 1 | 100.0 |" in text and not any("nan" in row for row in rows)


def test_a_report_of_a_sweeps_name_whose_smoke_run_exists_points_to_it(tmp_path, capsys):
    """`rlkit sweep spec.toml --budget smoke` writes sweeps/<name>-smoke: a report of sweeps/<name>
    says where the sweep is instead of asking for a sweep that was run."""
    (tmp_path / "compare-smoke").mkdir()
    (tmp_path / "compare-smoke" / "manifest.json").write_text("{}")
    assert main(["report", str(tmp_path / "compare")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'compare-smoke'} holds the sweep run with --budget smoke" in err
    assert main(["report", str(tmp_path / "other")]) == 2
    assert "run rlkit sweep first" in capsys.readouterr().err


def test_an_env_of_the_sweep_without_a_finished_run_is_named_left_out_unless_envs_chose_others(tmp_path):
    envs = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0")
    finals = {(v, e, s): [100.0 + s + 10 * (v == "b")] for v in ("a", "b") for e in envs[:2] for s in (1, 2, 3)}
    finals[("a", "MountainCar-v0", 1)] = [math.nan]  # its one finished run has no finite score
    sweep = fake_sweep(tmp_path, finals, envs=envs)
    summary = strict_json(write_report(str(sweep), reps=REPS)["summary"])
    assert summary["envs_aggregated"] == ["Acrobot-v1", "CartPole-v1"]
    assert summary["envs_left_out"] == {"MountainCar-v0": "no finished run with a finite score"}
    chosen = strict_json(write_report(str(sweep), reps=REPS, envs=["CartPole-v1"], out_dir=str(tmp_path / "r"))
                         ["summary"])
    assert chosen["envs_left_out"] == {} and chosen["envs_aggregated"] == ["CartPole-v1"]
