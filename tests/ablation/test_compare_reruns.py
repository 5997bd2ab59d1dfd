"""experiments/compare_reruns.py: the committed report beside its rerun, as the readings quote it."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADER = "variant,env,seed,kind,step,wall_s,eval_return_mean,eval_return_std\n"


def report(folder: Path, rows: list[str], per_env: list[dict], aggregate: dict | None = None) -> Path:
    folder.mkdir()
    (folder / "results.csv").write_text(HEADER + "".join(r + "\n" for r in rows))
    summary = {"baseline": "sb3:ppo", "per_env": per_env}
    if aggregate:
        summary.update(aggregate=aggregate, improvement={"ppo": [0.6, 0.4, 0.8]})
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def env_row(variant: str, iqm: float) -> dict:
    return {"env": "E", "variant": variant, "iqm": iqm, "iqm_low": iqm - 1, "iqm_high": iqm + 1}


def test_it_counts_the_equal_evaluations_and_sets_each_statistic_beside_its_rerun(tmp_path):
    old = report(tmp_path / "old", ["ppo,E,1,rlkit,10,1.0,5.0,0", "ppo,E,1,rlkit,20,2.0,6.0,0",
                                    "sb3:ppo,E,1,sb3,10,1.0,4.0,0"], [env_row("ppo", 6.0), env_row("sb3:ppo", 4.0)],
                 {"ppo": {"iqm": [0.9, 0.8, 1.0]}, "sb3:ppo": {"iqm": [0.7, 0.6, 0.8]}})
    new = report(tmp_path / "new", ["ppo,E,1,rlkit,10,1.5,5.0,0", "ppo,E,1,rlkit,20,2.5,6.5,0",
                                    "sb3:ppo,E,1,sb3,10,1.1,4.0,0"], [env_row("ppo", 6.5)],
                 {"ppo": {"iqm": [0.85, 0.7, 0.95]}})
    out = subprocess.run([sys.executable, str(ROOT / "experiments" / "compare_reruns.py"), str(old), str(new)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "Evaluations equal to the committed run's: 2 of 3 (rlkit 1 of 2, baselines 1 of 1)."
    assert "| E | ppo | 6.0 [5.0, 7.0] | 6.5 [5.5, 7.5] |" in out
    assert "| E | sb3:ppo | 4.0 [3.0, 5.0] | — |" in out  # no rerun of it: a dash, not a made-up number
    assert "| ppo | 0.900 [0.800, 1.000] | 0.850 [0.700, 0.950] | 0.60 [0.40, 0.80] | 0.60 [0.40, 0.80] |" in out
    assert "| sb3:ppo | 0.700 [0.600, 0.800] | — | — | — |" in out


def compare(*folders):
    return subprocess.run([sys.executable, str(ROOT / "experiments" / "compare_reruns.py"), *map(str, folders)],
                          capture_output=True, text=True)


def test_a_nan_evaluation_the_rerun_repeats_counts_as_equal_and_a_missing_one_does_not(tmp_path):
    old = report(tmp_path / "old", ["ppo,E,1,rlkit,10,1.0,nan,0", "ppo,E,1,rlkit,20,2.0,nan,0"], [env_row("ppo", 1)])
    new = report(tmp_path / "new", ["ppo,E,1,rlkit,10,1.0,nan,0"], [env_row("ppo", 1)])
    assert compare(old, new).stdout.splitlines()[0] == "Evaluations equal to the committed run's: 1 of 2."


def test_reports_of_another_metric_normalization_or_baseline_are_refused_in_one_line(tmp_path):
    old = report(tmp_path / "old", ["ppo,E,1,rlkit,10,1.0,5.0,0"], [env_row("ppo", 5)])
    new = report(tmp_path / "new", ["ppo,E,1,rlkit,10,1.0,5.0,0"], [env_row("ppo", 5)])
    summary = json.loads((new / "summary.json").read_text())
    (new / "summary.json").write_text(json.dumps({**summary, "metric": "train100", "normalize": "best-mean"}))
    done = compare(old, new)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == ("compare_reruns: error: the two reports differ in metric, normalize: their "
                                   "statistics are not comparable (report the rerun as the committed report was)")
    gone = compare(old, tmp_path / "missing")
    assert gone.returncode == 2 and len(gone.stderr.strip().splitlines()) == 1 and "missing" in gone.stderr


def _with(folder: Path, **fields) -> None:
    summary = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").write_text(json.dumps({**summary, **fields}))


def test_unrecorded_normalization_resamples_or_a_subset_are_not_taken_as_comparable(tmp_path):
    agg = {"ppo": {"iqm": [0.9, 0.8, 1.0]}}
    old = report(tmp_path / "old", ["ppo,E,1,rlkit,10,1.0,5.0,0"], [env_row("ppo", 5)], agg)  # min-max, unrecorded
    new = report(tmp_path / "new", ["ppo,E,1,rlkit,10,1.0,5.0,0"], [env_row("ppo", 5)])
    _with(new, normalize="none")
    assert compare(old, new).returncode == 2 and "differ in normalize" in compare(old, new).stderr
    _with(new, normalize="minmax", aggregate=agg, reps=100, variants=["ppo"], variants_of_sweep=["ppo", "x"])
    _with(old, reps=20000, variants=["ppo", "x"])
    done = compare(old, new)
    assert done.returncode == 2 and "differ in reps, shown" in done.stderr
    _with(new, reps=20000, variants=["ppo", "x"], variants_of_sweep=None)
    new_summary = json.loads((new / "summary.json").read_text())
    del new_summary["variants_of_sweep"]
    (new / "summary.json").write_text(json.dumps(new_summary))
    assert compare(old, new).returncode == 0


def test_a_summary_of_another_shape_is_one_line(tmp_path):
    old = report(tmp_path / "old", ["ppo,E,1,rlkit,10,1.0,5.0,0"], [env_row("ppo", 5)])
    new = report(tmp_path / "new", ["ppo,E,1,rlkit,10,1.0,5.0,0"], [env_row("ppo", 5)])
    (new / "summary.json").write_text("[1, 2]")
    done = compare(old, new)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "not a report's" in done.stderr
    summary = json.loads((old / "summary.json").read_text())
    del summary["baseline"]
    (old / "summary.json").write_text(json.dumps({**summary, "aggregate": {"ppo": {"iqm": [1, 0, 2]}}}))
    assert compare(old, old).returncode == 0  # a summary from before the baseline was recorded


def test_a_rerun_over_other_envs_is_refused_with_the_flag_that_matches_them(tmp_path):
    old = report(tmp_path / "old", ["ppo,E,1,rlkit,10,1.0,5.0,0"], [env_row("ppo", 5)])
    new = report(tmp_path / "new", ["ppo,E,1,rlkit,10,1.0,5.0,0", "ppo,F,1,rlkit,10,1.0,5.0,0"],
                 [env_row("ppo", 5), {**env_row("ppo", 7), "env": "F"}])
    done = compare(old, new)
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert "differ in envs" in done.stderr and "rlkit report --envs E reports on the committed envs" in done.stderr


def test_a_rerun_that_lacks_a_committed_env_is_pointed_at_the_envs_both_have(tmp_path):
    old = report(tmp_path / "old", ["ppo,E,1,rlkit,10,1.0,5.0,0", "ppo,F,1,rlkit,10,1.0,5.0,0"],
                 [env_row("ppo", 5), {**env_row("ppo", 7), "env": "F"}])
    new = report(tmp_path / "new", ["ppo,E,1,rlkit,10,1.0,5.0,0", "ppo,G,1,rlkit,10,1.0,5.0,0"],
                 [env_row("ppo", 5), {**env_row("ppo", 7), "env": "G"}])
    done = compare(old, new)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "the rerun has no runs on F; rlkit report --envs E on both reports on the envs they share" in done.stderr
