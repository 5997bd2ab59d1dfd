"""experiments/ppo_objectives/table1_reading.py: rlkit's Table 1 beside the paper's."""

import json
import subprocess
import sys
from pathlib import Path

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
    assert "- all settings: Kendall's tau 0.33 over 3; best in the paper clip0.2, in rlkit clip0.1" in out
    assert "- clipping: Kendall's tau -1.00 over 2; best in the paper clip0.2, in rlkit clip0.1" in out


def test_a_report_of_another_metric_or_normalization_is_refused_in_one_line(tmp_path):
    done = run(summary(tmp_path, normalize="minmax"))
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert "--metric train100 --normalize best-mean" in done.stderr


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
    assert "- clipping: Kendall's tau undefined (rlkit's scores all tie) over 3; best in the paper clip0.2, " \
           "in rlkit clip0.1 = clip0.2 = clip0.3" in out
