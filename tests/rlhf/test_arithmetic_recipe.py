"""experiments/arithmetic/run.py's mechanics with the tiny model: the initial model and each segment
are evaluated on held-out prompts into curve.jsonl, and a second call continues rather than repeats;
trl_grpo.py (when trl is installed) adds TRL's GRPOTrainer to the same curve, and report.py reads it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import tiny_lm

ROOT = Path(__file__).parents[2]


def test_the_recipe_records_a_curve_and_continues_where_it_stopped(tmp_path):
    policy, _, _ = tiny_lm.save_models(tmp_path)
    data = tmp_path / "p.jsonl"
    data.write_text('{"prompt": "the movie was", "answer": "good"}\n{"prompt": "a plot", "answer": "boring"}\n')
    (tmp_path / "rw.py").write_text("def correct(completions, answer, **kw):\n"
                                    "    return [1.0 if a in c.split() else 0.0 for c, a in zip(completions, answer)]\n")
    out = tmp_path / "out"

    def run(*seeds):
        subprocess.run([sys.executable, str(ROOT / "experiments" / "arithmetic" / "run.py"), "--out", str(out),
                        "--policy", str(policy), "--train", str(data), "--heldout", str(data), "--reward",
                        f"{tmp_path}/rw.py:correct", "--methods", "rloo", "--seeds", *map(str, seeds), "--minutes",
                        "1e-6", "--segment", "1", "--no-chat-template"], check=True, capture_output=True, timeout=600)
        return [json.loads(line) for line in (out / "curve.jsonl").read_text().splitlines()]

    first = run(1)
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
