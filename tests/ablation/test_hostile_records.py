"""Records a sweep reads back (``result.json``, status files, ``manifest.json``) that are valid JSON
of the wrong shape: a result or status is treated as a damaged one (the run resumes from its
checkpoints, and runs.csv says why it is not counted); a manifest is refused in one line naming
the file, which is left as it is. Never a traceback, never a run silently dropped."""

import json
import shutil
from pathlib import Path

import pytest

from rlkit.ablation.results import write_tables
from rlkit.ablation.runner import run_state
from rlkit.ablation.sweep import plan
from rlkit.cli import main

SPEC = """name = "t"
envs = ["rlkit-test/IdentityDiscrete-v0"]
seeds = 2
total_steps = 256
num_envs = 2
num_steps = 64
num_minibatches = 2
update_epochs = 1
eval_episodes = 1
checkpoint_every = 128
[variants]
ppo = {}
"""
WRONG_RESULTS = ['{"eval_history": 5, "steps_per_second": "fast", "total_steps": 16384}', '{"eval_history": [[1, 2]]}',
                 "{}", '{"total_steps": 256, "eval_history": [], "seed": 2}', "[1, 2]",
                 '{"total_steps": 256, "eval_history": [[256, 1.0, 0.0]], "eval_seconds": [1, 2]}']


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A finished sweep of two runs (its spec file, its directory), copied by each test."""
    root = tmp_path_factory.mktemp("hostile_records")
    (root / "spec.toml").write_text(SPEC)
    assert main(["sweep", str(root / "spec.toml"), "--out", str(root / "sweep"), "--workers", "1"]) == 0
    return root / "spec.toml", root / "sweep"


def _copy(sweep, tmp_path):
    spec, out = sweep
    shutil.copytree(out, tmp_path / "sweep")
    return str(spec), tmp_path / "sweep"


def _run_csv(out: Path) -> list[dict[str, str]]:
    import csv

    with open(out / "runs.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("text", WRONG_RESULTS)
def test_a_result_of_the_wrong_shape_is_not_counted_and_the_sweep_resumes_its_run(sweep, tmp_path, capsys, text):
    spec, out = _copy(sweep, tmp_path)
    first, _ = plan(spec, str(out))[0].runs
    result = out / "runs" / first.name / "result.json"
    result.write_text(text)
    assert run_state(out, first) == "partial"
    assert write_tables(out, plan(spec, str(out))[0]) == (1, 0, 1)
    row = next(r for r in _run_csv(out) if r["seed"] == "1")
    assert row["status"] == "missing" and "result.json" in row["error"] and "resumes" in row["error"]
    assert main(["report", str(out), "--reps", "100", "--normalize", "none"]) == 0  # on the run that counts
    if text not in WRONG_RESULTS[:2]:
        return
    assert main(["sweep", spec, "--out", str(out), "--workers", "1"]) == 0  # resumed: evaluated again
    capsys.readouterr()
    fixed = json.loads(result.read_text())
    assert fixed["seed"] == 1 and fixed["total_steps"] == 256 and len(fixed["eval_history"]) == 1
    assert [r["status"] for r in _run_csv(out)] == ["done", "done"]


@pytest.mark.parametrize("text", ['{"status": "failed", "error": 5}', '{"status": 3}', '{"status": "done", "seconds": "x"}',
                                  '["failed"]'])
def test_a_status_file_of_the_wrong_shape_counts_as_none(sweep, tmp_path, text):
    spec, out = _copy(sweep, tmp_path)
    first, second = plan(spec, str(out))[0].runs
    (out / "status" / f"{first.name}.json").write_text(text)
    shutil.rmtree(out / "runs" / second.name)
    (out / "status" / f"{second.name}.json").write_text(text)
    assert (run_state(out, first), run_state(out, second)) == ("done", "new")
    assert write_tables(out, plan(spec, str(out))[0]) == (1, 0, 1)
    done = next(r for r in _run_csv(out) if r["seed"] == "1")
    assert done["status"] == "done" and done["run_seconds"] == ""


@pytest.mark.parametrize("change", [{"runs": [1]}, {"budget": 5}, {"extended_from": "x"}, {"runs": {"../x": ["rlkit", {}]}},
                                    {"runs": {"a": "rlkit"}}, {"spec": [1]}])
def test_a_manifest_of_the_wrong_shape_is_one_line_naming_it_and_left_as_it_is(sweep, tmp_path, capsys, change):
    spec, out = _copy(sweep, tmp_path)
    manifest = out / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), **change}))
    before = manifest.read_bytes()
    for argv in (["sweep", spec, "--out", str(out)], ["sweep", spec, "--out", str(out), "--dry-run"],
                 ["report", str(out)], ["records", "keep", str(out), str(tmp_path / "kept")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "Traceback" not in err and err.count("\n") == 1 and "manifest.json" in err, (argv, err)
    assert manifest.read_bytes() == before and not (tmp_path / "kept" / "manifest.json").exists()


def test_a_finished_run_whose_result_is_of_the_wrong_shape_is_evaluated_again_on_resume(sweep, tmp_path, capsys):
    _, out = _copy(sweep, tmp_path)
    run = next((out / "runs").iterdir())
    (run / "result.json").write_text('{"total_steps": 256, "eval_history": 5, "eval_return_mean": 1.0}')
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == json.loads((run / "result.json").read_text())
    (step, mean, std), = printed["eval_history"]  # one evaluation, made again at the end
    assert step == 256 and mean == printed["eval_return_mean"]


def test_a_report_folder_that_cannot_be_written_is_one_line(sweep, tmp_path, capsys):
    from tests.robustness.test_run_lock import unwritable

    _, out = _copy(sweep, tmp_path)
    (out / "report").mkdir(exist_ok=True)
    with unwritable(out / "report"):
        assert main(["report", str(out), "--reps", "100", "--normalize", "none"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write in {out / 'report'}" in err, err
