"""experiments/arithmetic/run.py's mechanics with the tiny model: the initial model and each segment
are evaluated on held-out prompts into curve.jsonl, and a second call continues rather than repeats;
trl_grpo.py (when trl is installed) adds TRL's GRPOTrainer to the same curve, and report.py reads it."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import tiny_lm
from tests.processes import children, wait_gone, wait_until

ROOT = Path(__file__).parents[2]


HANGS_WHEN_TOLD = """
import os, time
from pathlib import Path

def correct(completions, answer, **kw):  # hangs in the training run (after the initial model's evaluation)
    if os.environ.get("RLKIT_TEST_HANG"):
        first = Path(os.environ["RLKIT_TEST_HANG"] + ".first")
        if not first.exists():
            first.write_text(str(os.getpid()))
        elif first.read_text() != str(os.getpid()):
            Path(os.environ["RLKIT_TEST_HANG"]).touch()
            time.sleep(600)
    return [1.0 if a in c.split() else 0.0 for c, a in zip(completions, answer)]
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_recipe_records_a_curve_stops_on_a_sigterm_to_it_alone_and_continues_where_it_stopped(tmp_path):
    policy, _, _ = tiny_lm.save_models(tmp_path)
    data = tmp_path / "p.jsonl"
    data.write_text('{"prompt": "the movie was", "answer": "good"}\n{"prompt": "a plot", "answer": "boring"}\n')
    (tmp_path / "rw.py").write_text(HANGS_WHEN_TOLD)
    out, marker = tmp_path / "out", tmp_path / "hanging"

    def command(*seeds):
        return [sys.executable, str(ROOT / "experiments" / "arithmetic" / "run.py"), "--out", str(out), "--policy",
                str(policy), "--train", str(data), "--heldout", str(data), "--reward", f"{tmp_path}/rw.py:correct",
                "--methods", "rloo", "--seeds", *map(str, seeds), "--minutes", "1e-6", "--segment", "1",
                "--no-chat-template"]

    def run(*seeds):
        subprocess.run(command(*seeds), check=True, capture_output=True, timeout=600)
        return [json.loads(line) for line in (out / "curve.jsonl").read_text().splitlines()]

    # The first training run hangs in its reward function; SIGTERM goes to the script's pid alone (its
    # rlkit command runs in a session of its own): the script passes it on, and nothing is left running.
    script = subprocess.Popen(command(1), env={**os.environ, "RLKIT_TEST_HANG": str(marker)}, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    assert wait_until(marker.exists), script.communicate(timeout=60)[1][-1500:]
    runs = children(script.pid)
    script.send_signal(signal.SIGTERM)
    err = script.communicate(timeout=60)[1]
    assert script.returncode == 1 and "run the same command to continue" in err, err[-1500:]
    assert runs and wait_gone(runs) == []
    first = run(1)  # the same command continues: the initial model's evaluation is kept, the run starts again
    assert [(p["method"], p["seed"], p["iterations"]) for p in first] == [("initial", 0, 0), ("rloo", 1, 1)]
    assert first[1]["train_seconds"] > 0 and 0 <= first[1]["accuracy"]["mean"] <= 1
    assert (out / "rloo__s1" / "policy.safetensors").is_file()
    again = run(1, 2)
    assert again[:2] == first and [(p["method"], p["seed"]) for p in again[2:]] == [("rloo", 2)]
    assert all(p["peak_rss_gb"] > 0.05 for p in again[1:])  # each training process's own peak, in GB


FOUR = "".join(f'{{"prompt": "{p}", "answer": "{a}"}}\n' for p, a in
               [("the movie was", "good"), ("a plot", "boring"), ("i liked it", "fun"), ("it was", "great")])


def test_trl_grpo_adds_its_seeds_to_the_curve_and_the_report_reads_it(tmp_path):
    pytest.importorskip("trl")
    policy, _, _ = tiny_lm.save_models(tmp_path)
    data = tmp_path / "p.jsonl"
    data.write_text(FOUR)
    (tmp_path / "rw.py").write_text("def correct(completions, answer, **kw):\n"
                                    "    return [1.0 if a in c.split() else 0.0 for c, a in zip(completions, answer)]\n")
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(ROOT / "experiments" / "arithmetic" / "trl_grpo.py"), "--out", str(out),
                    "--policy", str(policy), "--train", str(data), "--heldout", str(data), "--reward",
                    f"{tmp_path}/rw.py:correct", "--seeds", "1", "--minutes", "1e-6", "--segment", "1",
                    "--no-chat-template"], check=True, capture_output=True, timeout=600)
    points = [json.loads(line) for line in (out / "curve.jsonl").read_text().splitlines()]
    assert [(p["method"], p["seed"], p["iterations"]) for p in points] == [("trl-grpo", 1, 1)]
    assert points[0]["train_seconds"] > 0 and 0 <= points[0]["accuracy"]["mean"] <= 1 and points[0]["peak_rss_gb"] > 0
    assert (out / "trl-grpo__s1" / "done").is_file() and not (out / "trl-grpo__s1" / "snapshot").exists()
    (out / "curve.jsonl").write_text((out / "curve.jsonl").read_text() + json.dumps(
        {"method": "initial", "seed": 0, "iterations": 0, "train_seconds": 0.0,
         "accuracy": {"mean": 0.25, "low": 0.0, "high": 0.5, "applied": 1.0}}) + "\n")
    subprocess.run([sys.executable, str(ROOT / "experiments" / "arithmetic" / "report.py"), str(out)], check=True,
                   capture_output=True, timeout=120)
    report = (out / "report.md").read_text()
    assert "| initial model | — | 0 | — | — | 0.250 [0.000, 0.500] | — |" in report
    assert "| trl-grpo | 1 | 1 | " in report and (out / "curve.png").stat().st_size > 1000


def test_the_report_compares_at_equal_wall_time(tmp_path):
    def point(method, seed, iterations, seconds, accuracy):
        return {"method": method, "seed": seed, "iterations": iterations, "train_seconds": seconds,
                "accuracy": {"mean": accuracy, "low": accuracy - 0.05, "high": accuracy + 0.05}, "peak_rss_gb": 1.5}

    curve = [point("initial", 0, 0, 0.0, 0.1), point("grpo", 1, 15, 200.0, 0.5), point("grpo", 1, 30, 400.0, 0.6),
             point("grpo", 1, 45, 620.0, 0.7), point("slow", 1, 10, 700.0, 0.9), point("grpo", 2, 15, 300.0, 0.4),
             point("slow", 2, 5, 100.0, 0.3)]
    curve[1]["peak_rss_gb"], curve[3]["peak_rss_gb"] = 1.25, 9.0  # a fresh process; one past the budget
    (tmp_path / "curve.jsonl").write_text("".join(json.dumps(p) + "\n" for p in curve))
    subprocess.run([sys.executable, str(ROOT / "experiments" / "arithmetic" / "report.py"), str(tmp_path),
                    "--minutes", "10"], check=True, capture_output=True, timeout=120)
    report = (tmp_path / "report.md").read_text()
    assert "| grpo | 1 | 30 | 400 | 13.33 | 0.600 [0.550, 0.650] | 1.25 / 1.50 |" in report  # not the point at 620 s
    assert "| slow | 1 | no point within 10 minutes |" in report and "after at most 10 minutes" in report
    assert "| grpo | mean of 2 | 22.5 | | 16.67 | 0.500 (seeds 0.400–0.600) | 1.50 / 1.50 |" in report
    assert "| slow | mean of 1 of 2 seeds | 5.0 | | 20.00 | 0.300 (seeds 0.300–0.300) | 1.50 |" in report
    subprocess.run([sys.executable, str(ROOT / "experiments" / "arithmetic" / "report.py"), str(tmp_path)],
                   check=True, capture_output=True, timeout=120)
    assert "| grpo | 1 | 45 | 620 |" in (tmp_path / "report.md").read_text()
    (tmp_path / "curve.jsonl").write_text("{}\n" + (tmp_path / "curve.jsonl").read_text())
    bad = subprocess.run([sys.executable, str(ROOT / "experiments" / "arithmetic" / "report.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stderr.strip().endswith("line 1 is not a point (method, seed, iterations, "
                                                               "train_seconds, accuracy)"), bad.stderr
