"""experiments/ppo_objectives/table1_reading.py: rlkit's Table 1 beside the paper's."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "ppo_objectives" / "table1_reading.py"


def summary(tmp_path: Path, **changes) -> Path:
    means = {"clip0.2": [0.9, 0.8, 1.0], "clip0.1": [0.95, 0.9, 1.0], "noclip": [-0.2, -0.3, 0.0]}
    s = {"metric": "train100", "normalize": "best-mean", "baseline": "clip0.2", "envs_aggregated": ["A-v5", "B-v5"],
         "aggregate": {v: {"mean": m, "iqm": m} for v, m in means.items()},
         "improvement": {"clip0.1": [0.6, 0.4, 0.8], "noclip": [0.0, 0.0, 0.1]},
         "references": {"A-v5": {"random": 0.0, "reference": 100.0}, "B-v5": {"random": -10.0, "reference": 10.0}},
         "per_env": [{"variant": v, "env": e, "mean": m} for v, e, m in
                     [("clip0.2", "A-v5", 80.0), ("clip0.2", "B-v5", 10.0), ("clip0.1", "A-v5", 100.0),
                      ("clip0.1", "B-v5", 8.0), ("noclip", "A-v5", -20.0), ("noclip", "B-v5", -10.0)]]}
    s.update(changes)
    (tmp_path / "summary.json").write_text(json.dumps(s))
    return tmp_path


def run(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(folder)], capture_output=True, text=True)


def test_each_setting_stands_beside_the_papers_figure_with_both_orders(tmp_path):
    out = run(summary(tmp_path)).stdout.splitlines()
    assert "| clip0.2 | 0.82 | 0.90 [0.80, 1.00] | 0.90 [0.80, 1.00] | — | 1 / 2 |" in out
    assert "| clip0.1 | 0.76 | 0.95 [0.90, 1.00] | 0.95 [0.90, 1.00] | 0.60 [0.40, 0.80] | 2 / 1 |" in out
    assert "| noclip | -0.39 | -0.20 [-0.30, 0.00] | -0.20 [-0.30, 0.00] | 0.00 [0.00, 0.10] | 3 / 3 |" in out
    assert "| clip0.1 | 1.00 | 0.90 |" in out and "| noclip | -0.20 | 0.00 |" in out  # per task, normalized
    assert "- all settings: Kendall's tau-b 0.33 over 3; best in the paper clip0.2, in rlkit clip0.1" in out
    assert "- clipping: Kendall's tau-b -1.00 over 2; best in the paper clip0.2, in rlkit clip0.1" in out
    assert "- all but noclip: Kendall's tau-b -1.00 over 2; best in the paper clip0.2, in rlkit clip0.1" in out
    assert "- pairs in the opposite order: 1 of 3 (clip0.1 / clip0.2)" in out
    assert "- pairs equal on one side only: 0 of 3" in out


def test_pairs_tied_on_one_side_only_are_named(tmp_path):
    means = {"clip0.2": [0.9, 0.8, 1.0], "kladapt0.03": [0.804, 0.7, 0.9], "klfix1": [0.87, 0.8, 0.9],
             "klfix3": [0.874, 0.8, 0.9]}
    out = run(summary(tmp_path, aggregate={v: {"mean": m, "iqm": m} for v, m in means.items()})).stdout.splitlines()
    assert "- pairs in the opposite order: 0 of 6" in out
    assert "- pairs equal on one side only: 2 of 6 (kladapt0.03 / klfix1, klfix1 / klfix3)" in out


def test_a_report_of_another_metric_or_normalization_is_refused_in_one_line(tmp_path):
    for changes in ({"normalize": "none"}, {"metric": "final"}):
        done = run(summary(tmp_path, **changes))
        assert done.returncode == 2 and done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
        assert "--metric train100 --normalize best-mean (or minmax)" in done.stderr


def test_both_readings_of_the_papers_best_result_are_read_and_named(tmp_path):
    said = {"best-mean": "a random policy 0, the best setting's mean on the task 1 (--normalize best-mean).",
            "minmax": "a random policy 0, the best run on the task 1 (--normalize minmax)."}
    for normalize, line in said.items():
        out = run(summary(tmp_path, normalize=normalize)).stdout.splitlines()
        assert out[1] == "Normalized per task: " + line, out
        assert "| clip0.1 | 0.76 | 0.95 [0.90, 1.00] | 0.95 [0.90, 1.00] | 0.60 [0.40, 0.80] | 2 / 1 |" in out


def test_another_baseline_or_none_of_the_papers_settings_is_refused(tmp_path):
    for changes, says in (({"baseline": "noclip"}, "needs --baseline clip0.2"),
                          ({"aggregate": {"mine": {"mean": [1, 1, 1], "iqm": [1, 1, 1]}}}, "none of the paper's")):
        done = run(summary(tmp_path, **changes))
        assert done.returncode == 2 and done.stdout == "" and says in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_tied_scores_share_their_rank_and_an_undefined_tau_says_so(tmp_path):
    tied = {v: {"mean": [0.5, 0.4, 0.6], "iqm": [0.5, 0.4, 0.6]} for v in ("clip0.1", "clip0.2", "clip0.3")}
    out = run(summary(tmp_path, aggregate=tied)).stdout.splitlines()
    assert any(line.startswith("| clip0.1 |") and line.endswith("| 2 / 2 |") for line in out), out
    assert "- clipping: Kendall's tau-b undefined (rlkit's scores all tie) over 3; best in the paper clip0.2, " \
           "in rlkit clip0.1 = clip0.2 = clip0.3" in out


def test_the_coverage_names_tasks_runs_and_settings_left_out_before_the_tables(tmp_path):
    folder = summary(tmp_path, seeds_aggregated={"clip0.2": 3, "clip0.1": 2, "noclip": 3},
                     runs_left_out=["clip0.1 / B-v5 / seed 2"], envs_left_out={"C-v5": "no finished runs of noclip"},
                     intervals={"intervals_reliable": False, "fewest_runs": 2, "min_runs": 5})
    out = run(folder).stdout.splitlines()
    assert out[0] == ("Tasks: A-v5, B-v5 (2 of the paper's 7); seeds per setting: noclip 3, clip0.1 2, clip0.2 3 "
                      "(the paper's: 3 seeds x 7 tasks = 21).")
    assert "Not aggregated: HalfCheetah-v5 (no finished run);" in out[2]
    assert "The paper's settings not in this report: clip0.3, kladapt0.003," in out[3]
    assert out[4].startswith("Runs left out of the aggregate (a seed must finish on every task): clip0.1 / B-v5 / seed 2. "
                             "The per-task means include them")
    assert out[5].startswith("Few runs: 2 per setting and task at the fewest, below the 5")
    assert "| noclip | -0.39 | -0.20 [-0.30, 0.00] | -0.20 [-0.30, 0.00] | 0.00 [0.00, 0.10] | 3 / 3 |" in out
    assert run(summary(tmp_path, seeds_aggregated={"clip0.2": 3, "clip0.1": 3, "noclip": 3})).stdout.startswith(
        "Tasks: A-v5, B-v5 (2 of the paper's 7); 3 seeds x 2 tasks = 6 runs per setting")


def test_envs_chosen_by_envs_or_absent_from_the_sweep_say_so(tmp_path):
    out = run(summary(tmp_path, envs_of_sweep=["A-v5", "B-v5", "Hopper-v5"])).stdout.splitlines()
    assert out[2].startswith("Not aggregated: HalfCheetah-v5 (not in the sweep); Hopper-v5 (left out by --envs);")


def test_a_zero_width_interval_is_marked_degenerate(tmp_path):
    out = run(summary(tmp_path, improvement={"clip0.1": [1.0, 1.0, 1.0], "noclip": [0.0, 0.0, 0.1]})).stdout
    assert "| 1.00 [1.00, 1.00] (degenerate) |" in out and "0.00 [0.00, 0.10] |" in out


def test_scores_equal_at_the_printed_two_decimals_share_a_rank(tmp_path):
    means = {"clip0.2": [0.841, 0.8, 0.9], "clip0.1": [0.838, 0.8, 0.9], "noclip": [0.1, 0.0, 0.2]}
    agg = {v: {"mean": m, "iqm": m} for v, m in means.items()}
    out = run(summary(tmp_path, aggregate=agg)).stdout.splitlines()
    assert any(line.startswith("| clip0.1 |") and line.endswith("| 2 / 1.5 |") for line in out), out
    assert any(line.startswith("| clip0.2 |") and line.endswith("| 1 / 1.5 |") for line in out), out
    assert "- clipping: Kendall's tau-b undefined (rlkit's scores all tie) over 2; best in the paper clip0.2, " \
           "in rlkit clip0.1 = clip0.2" in out


def test_an_undefined_tau_names_the_side_whose_scores_tie(tmp_path):
    agg = {"kladapt0.03": {"mean": [0.5, 0.4, 0.6], "iqm": [0.5, 0.4, 0.6]},
           "klfix1": {"mean": [0.7, 0.6, 0.8], "iqm": [0.7, 0.6, 0.8]}}
    out = run(summary(tmp_path, aggregate=agg)).stdout.splitlines()
    assert "- all settings: Kendall's tau-b undefined (the paper's scores all tie) over 2; best in the paper " \
           "kladapt0.03 = klfix1, in rlkit klfix1" in out


def test_a_setting_without_a_mean_on_every_task_is_named_under_the_per_task_table(tmp_path):
    base = json.loads(summary(tmp_path).joinpath("summary.json").read_text())
    rows = [r for r in base["per_env"] if (r["variant"], r["env"]) != ("clip0.1", "B-v5")]
    out = run(summary(tmp_path, per_env=rows)).stdout.splitlines()
    assert "Without a mean on every task, left out of this table: clip0.1." in out
    assert not any(line.startswith("| clip0.1 | 1.00") for line in out)


def test_a_summary_of_odd_fields_is_refused_in_one_line_never_a_traceback(tmp_path):
    nan_mean = {"clip0.1": {"mean": [float("nan"), 0.1, 0.2], "iqm": [0.1, 0.1, 0.2]}}
    cases = [{"references": None}, {"references": {"A-v5": {"random": 0.0, "reference": 0.0}}},
             {"envs_aggregated": "A-v5"}, {"envs_aggregated": []}, {"improvement": {"clip0.1": [0.5]}},
             {"aggregate": {"clip0.1": {"mean": [True, 0, 1], "iqm": [0.1, 0.1, 0.2]}}}, {"aggregate": nan_mean},
             {"aggregate": {"clip0.1": {"mean": [0.5, 0.4, 0.6]}}}, {"per_env": [{"variant": "clip0.1", "env": "A-v5"}]},
             {"per_env": [{"variant": "noclip", "env": "A-v5", "mean": 1.0}] * 2}, {"runs_left_out": "x"}]
    spec = importlib.util.spec_from_file_location("table1_reading", SCRIPT)
    reading = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reading)
    for changes in cases:
        with pytest.raises(reading.Refused) as refused:
            reading.load(summary(tmp_path, **changes))
        assert "\n" not in str(refused.value), changes
    done = run(summary(tmp_path, **cases[0]))
    assert done.returncode == 2 and done.stdout == "" and done.stderr.startswith("table1_reading: error: ")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_score_that_rounds_to_zero_prints_without_a_sign(tmp_path):
    agg = {"clip0.2": {"mean": [0.9, 0.8, 1.0], "iqm": [0.9, 0.8, 1.0]},
           "noclip": {"mean": [-0.001, -0.08, 0.09], "iqm": [-0.004, -0.02, 0.09]}}
    out = run(summary(tmp_path, aggregate=agg)).stdout.splitlines()
    assert "| noclip | -0.39 | 0.00 [-0.08, 0.09] | 0.00 [-0.02, 0.09] | 0.00 [0.00, 0.10] | 2 / 2 |" in out, out
