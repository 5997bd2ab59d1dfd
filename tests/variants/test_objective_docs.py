"""docs/objectives.md's new objective, end to end: the module listed there, saved as a file and
named in ``RLKIT_VARIANTS``, shows its flags in ``rlkit train --help``, runs the page's command
(at a tiny budget) and the page's sweep spec (its smoke budget), comparing it with PPO."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "objectives.md"


def block(text: str, marker: str, lang: str) -> str:
    """The fenced ``lang`` block right after ``<!-- marker -->``."""
    found = re.search(rf"<!-- {re.escape(marker)} -->\n```{lang}\n(.*?)```", text, re.S)
    assert found, f"docs/objectives.md has no {lang} block after <!-- {marker} -->"
    return found.group(1)


SCRIPT = """
import json, sys
from rlkit.cli import main
try:
    main(["train", "--help"])
except SystemExit as stop:
    assert stop.code == 0, stop.code
run, sweep = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert main(run) == 0, "the run failed"
assert main(sweep) == 0, "the sweep failed"
"""


def test_the_pages_objective_runs_from_its_listing(tmp_path):
    text = PAGE.read_text()
    (tmp_path / "my_objective.py").write_text(block(text, "listing: my_objective.py", "python"))
    (tmp_path / "asym_clip.toml").write_text(block(text, "listing: asym_clip.toml", "toml"))
    words = shlex.split(block(text, "command: run", "bash"))
    assert words[:2] == ["RLKIT_VARIANTS=./my_objective.py", "rlkit"]
    run = words[2:] + ["--total-steps", "512", "--eval-episodes", "1", "--logdir", "runs"]  # a tiny budget
    sweep = ["sweep", "asym_clip.toml", "--budget", "smoke", "--workers", "2", "--out", "sweep"]
    env = {**os.environ, "RLKIT_VARIANTS": "./my_objective.py", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(run), json.dumps(sweep)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    for flag in ("--asym-clip-low", "--asym-clip-high"):
        assert flag in out.stdout
    runs = sorted((tmp_path / "runs").iterdir())
    assert [p.name.split("__")[1] for p in runs] == ["asymclip-0.2-0.28"] * 3
    results = [json.loads((p / "result.json").read_text()) for p in runs]
    assert all(r["updates"] > 0 for r in results)
    table = (tmp_path / "sweep" / "runs.csv").read_text()
    assert table.count(",done,") == 6 and "asym0.1-0.28" in table and "\nppo," in table
    first = json.loads((tmp_path / "sweep" / "manifest.json").read_text())
    assert "asym_clip_high" in json.dumps(first)
