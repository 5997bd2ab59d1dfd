"""benchmarks/ holds the lasting benchmarks, each listed in benchmarks/README.md with its command and
its latest figure between markers that a run replaces in place; checks/README.md lists every check;
no file names a benchmarks/ or checks/ path that does not exist."""

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlkit.ablation.measurements import markers, write_section

ROOT = Path(__file__).parents[1]
README = ROOT / "benchmarks" / "README.md"
HELPERS = {"common.py", "llm_common.py"}
MARKER = re.compile(r"^<!-- bench:(\S+) -->$", re.M)


def benchmarks() -> list[Path]:
    return sorted(p for p in (ROOT / "benchmarks").glob("*.py") if p.name not in HELPERS)


def sections(text: str) -> dict[str, str]:
    """Each marked section's key -> its body."""
    return {key: text.split(markers(key)[0] + "\n", 1)[1].split("\n" + markers(key)[1], 1)[0]
            for key in MARKER.findall(text)}


def test_every_benchmark_is_listed_with_its_command_and_a_figure():
    text = README.read_text()
    keys = list(sections(text))
    for script in benchmarks():
        assert f"\n## {script.name}: " in text, f"{script.name} has no section in benchmarks/README.md"
        assert f"python benchmarks/{script.name}" in text
        assert any(k == script.stem or k.startswith(script.stem + ":") for k in keys), script.name
    assert all((ROOT / "benchmarks" / f"{key.split(':')[0]}.py").is_file() for key in keys)


def test_every_figure_names_its_command_date_and_machine():
    for key, body in sections(README.read_text()).items():
        lines = body.splitlines()
        assert re.match(r"^### .+ — \d{4}-\d{2}-\d{2}", lines[0]), key
        assert lines[1].startswith("Command: `python benchmarks/"), key
        assert any(line.startswith("Machine: ") for line in lines[2:4]) and "|---|" in body, key


def test_every_key_a_benchmark_writes_has_its_figure(tmp_path):
    """Each ``emit(..., KEY)`` of a script names a section of the README (a key built from a
    setting's name: at least one section with its prefix), and writing a figure's own body back
    leaves the README as it is (its markers are whole)."""
    text = README.read_text()
    keys = list(sections(text))
    for script in benchmarks():
        written = re.findall(r'emit\(.*?args\.write, (f?)"([^"{]+)', script.read_text(), re.S)
        assert written, f"{script.name} writes no figure"
        for is_format, key in written:
            assert (any(k.startswith(key) for k in keys) if is_format else key in keys), (script.name, key)
    copy = tmp_path / "README.md"
    copy.write_text(text)
    for key, body in sections(text).items():
        write_section(copy, body, key)
    assert copy.read_text() == text


def test_every_check_is_described_in_the_checks_readme():
    text = (ROOT / "checks" / "README.md").read_text()
    for script in sorted((ROOT / "checks").iterdir()):
        if script.suffix in (".py", ".sh"):
            assert f"| `{script.name}` |" in text, script.name


def test_no_file_names_a_benchmarks_or_checks_path_that_is_gone():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    files = [ROOT / f for f in tracked if f.endswith((".md", ".py", ".sh", ".toml", ".ipynb")) or f.endswith("Makefile")]
    named = re.compile(r"(?<![\w/.-])((?:benchmarks|checks)/[\w./-]*\.(?:py|sh|md|toml))\b")
    gone = sorted({f"{f.relative_to(ROOT)}: {path}" for f in files if f.is_file()
                   for path in named.findall(f.read_text(errors="replace")) if not (ROOT / path).exists()})
    assert gone == []


def test_a_benchmark_run_replaces_its_figure_and_nothing_else(tmp_path, monkeypatch):
    """``sample_efficiency.py --summarize`` (its figure from recorded runs: nothing trained), run in
    this process and written into a copy of the README: its figure is the new one, every other line
    is as it was."""
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps({"env": "Hopper-v5", "seed": s, "total_steps": 2048, "eval_return_mean": r,
                                        "date": "2030-01-02 03:04", "machine": "m"}) + "\n"
                            for s, r in ((1, 10.0), (2, 30.0))))
    copy = tmp_path / "README.md"
    copy.write_text(README.read_text())
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    for name in ("sample_efficiency", "common"):  # this checkout's scripts, imported afresh
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(sys, "argv", ["sample_efficiency.py", "--summarize", "--out", str(runs), "--write", str(copy)])
    importlib.import_module("sample_efficiency").main()
    before, after = sections(README.read_text()), sections(copy.read_text())
    assert list(after) == list(before)
    assert {k for k in before if before[k] != after[k]} == {"sample_efficiency"}
    assert after["sample_efficiency"].startswith("### Sample efficiency, mujoco preset — 2030-01-02 03:04\n")
    assert "| Hopper-v5 | 2,048 | 2 | 20 ± 10 | s1: 10, s2: 30 | ~2400 |" in after["sample_efficiency"]
    assert copy.read_text().replace(after["sample_efficiency"], "") == \
        README.read_text().replace(before["sample_efficiency"], "")


@pytest.mark.slow
def test_a_timed_benchmark_run_replaces_its_figure_and_nothing_else(tmp_path):
    """``throughput.py`` at a tiny budget (its own processes, seconds of training), written into a
    copy of the README: its figure is the new run's, every other line is as it was."""
    copy = tmp_path / "README.md"
    copy.write_text(README.read_text())
    subprocess.run([sys.executable, "benchmarks/throughput.py", "--envs", "cartpole", "--seeds", "1", "--steps", "1024",
                    "--frameworks", "rlkit", "--write", str(copy)], cwd=ROOT, check=True, capture_output=True,
                   timeout=300)
    before, after = sections(README.read_text()), sections(copy.read_text())
    assert list(after) == list(before)
    assert {k for k in before if before[k] != after[k]} == {"throughput"}
    assert "| CartPole-v1 | 1,024 | 1 |" in after["throughput"]
    assert "--steps 1024" in after["throughput"].splitlines()[1]
    assert copy.read_text().replace(after["throughput"], "") == README.read_text().replace(before["throughput"], "")
