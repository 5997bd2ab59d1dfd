"""Nothing already written is lost or shared: run directories, RLHF runs, reward models, run names."""

import hashlib
import json
from pathlib import Path

import pytest

from rlkit.errors import ConfigError
from rlkit.io.checkpoint import new_run_dir
from tests.robustness.helpers import SMALL, error_line, last_json, run_cli, start_cli


def _start(*args):
    return start_cli(*args)


def test_runs_started_together_with_default_names_get_their_own_directories(tmp_path):
    logdir = str(tmp_path / "dup")
    procs = [_start("train", *SMALL, "--logdir", logdir, "--learning-rate", lr, "--checkpoint-every", "512")
             for lr in ("0.001", "0.0003")]
    outs = [p.communicate(timeout=120) for p in procs]
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert all(p.returncode == 0 for p in procs), [err[-500:] for _, err in outs]
    dirs = {r["run_dir"] for r in results}
    assert len(dirs) == 2
    lrs = sorted(json.loads((Path(d) / "config.json").read_text())["learning_rate"] for d in dirs)
    assert lrs == [0.0003, 0.001]
    assert all(len(list(Path(d).glob("events.out.tfevents.*"))) == 1 for d in dirs)


def test_runs_started_together_with_one_name_never_share_it(tmp_path):
    logdir = str(tmp_path / "same")
    procs = [_start("train", *SMALL, "--logdir", logdir, "--run-name", "r", "--learning-rate", lr)
             for lr in ("0.001", "0.0003")]
    for p in procs:
        p.communicate(timeout=120)
    assert sorted(p.returncode for p in procs) == [0, 2]
    assert [p.name for p in Path(logdir).iterdir()] == ["r"]


def test_new_run_dir_is_exclusive(tmp_path):
    a = new_run_dir(tmp_path, "x", numbered=True)
    b = new_run_dir(tmp_path, "x", numbered=True)
    assert (a.name, b.name) == ("x", "x-2")
    with pytest.raises(ConfigError, match="already exists"):
        new_run_dir(tmp_path, "x")


@pytest.mark.parametrize("name", [".", "..", "../x", "a/b", "/tmp/abs", "x" * 300, ""])
def test_a_run_name_is_one_folder_name(tmp_path, name):
    proc = run_cli("train", *SMALL, "--logdir", str(tmp_path / "runs"), "--run-name", name)
    assert "run name" in error_line(proc)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_an_existing_run_directory_keeps_its_files(tmp_path):
    logdir = tmp_path / "runs"
    first = last_json(run_cli("train", *SMALL, "--logdir", str(logdir), "--run-name", "r"))
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in Path(first["run_dir"]).rglob("*") if p.is_file()}
    line = error_line(run_cli("train", *SMALL, "--logdir", str(logdir), "--run-name", "r", "--learning-rate", "0.1"))
    assert "already has checkpoints" in line
    after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in Path(first["run_dir"]).rglob("*") if p.is_file()}
    assert before == after


def _tiny_models(tmp_path):
    from tests import tiny_lm

    return tiny_lm.save_models(tmp_path)


def test_rlhf_never_overwrites_a_run_of_the_same_name(tmp_path, capsys):
    from rlkit.cli import main

    policy_dir, rm_dir, prompts = _tiny_models(tmp_path)
    args = ["rlhf", "--policy", str(policy_dir), "--reward-model", str(rm_dir), "--prompts", str(prompts),
            "--iterations", "1", "--num-envs", "2", "--num-minibatches", "1", "--max-new-tokens", "2", "--logdir", str(tmp_path / "runs"),
            "--run-name", "r", "--torch-threads", "1"]
    assert main(args) == 0
    saved = tmp_path / "runs" / "r" / "policy.safetensors"
    digest = hashlib.sha256(saved.read_bytes()).hexdigest()
    capsys.readouterr()
    assert main(args + ["--seed", "2"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == digest


def test_rm_train_never_replaces_a_reward_model(tmp_path, capsys):
    from rlkit.cli import main

    policy_dir, rm_dir, _ = _tiny_models(tmp_path)
    data = tmp_path / "prefs.jsonl"
    data.write_text("\n".join(json.dumps({"prompt": "the movie was", "chosen": " good", "rejected": " bad"})
                              for _ in range(6)))
    weights = hashlib.sha256((rm_dir / "model.safetensors").read_bytes()).hexdigest()
    (rm_dir / "score_normalization.json").write_text('{"scale": 1.0, "shift": 0.0}')
    assert main(["rm", "train", "--backbone", str(policy_dir), "--data", str(data), "--output", str(rm_dir)]) == 2
    assert "already holds files" in capsys.readouterr().err
    assert hashlib.sha256((rm_dir / "model.safetensors").read_bytes()).hexdigest() == weights
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["rm", "train", "--backbone", str(policy_dir), "--data", str(data), "--output", str(a_file)]) == 2
    assert "is a file" in capsys.readouterr().err and a_file.read_text() == "x"
