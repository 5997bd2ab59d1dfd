"""experiments/arithmetic/run.py's mechanics with the tiny model: the initial model and each segment
are evaluated on held-out prompts into curve.jsonl, and a second call continues rather than repeats."""

import json
import subprocess
import sys
from pathlib import Path

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
