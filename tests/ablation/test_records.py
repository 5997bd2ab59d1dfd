"""``rlkit records``: a sweep's finished runs kept out of its directory and restored into a new one
bring it back to the same state and tables, a restored sweep runs only the rest, and nothing is
overwritten or mixed: records of another sweep, damaged records, differing files and a running
sweep are refused before anything is written."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rlkit.ablation.records import keep_records, restore_records
from rlkit.ablation.results import write_tables
from rlkit.ablation.sweep import plan, run_sweep, sweep_lock
from rlkit.cli import main
from rlkit.errors import ConfigError

ROOT = Path(__file__).parents[2]
SPEC = """
name = "t"
envs = ["CartPole-v1"]
seeds = 3
preset = "cartpole"
total_steps = {steps}
num_envs = 2
num_steps = 128
eval_every = 256
eval_episodes = 2

[variants]
ppo = {{}}
"""


def spec_file(folder: Path, steps: int = 512) -> str:
    path = folder / f"spec{steps}.toml"
    path.write_text(SPEC.format(steps=steps))
    return str(path)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A sweep of three runs: two finished, one never started (its run directory holds a checkpoint
    file only, as a run in flight does)."""
    root = tmp_path_factory.mktemp("records")
    spec = spec_file(root)
    run_sweep(spec, out=str(root / "sweep"), workers=1, pack="1", progress=False)
    shutil.rmtree(root / "sweep" / "runs" / "ppo__CartPole-v1__s3")
    (root / "sweep" / "status" / "ppo__CartPole-v1__s3.json").unlink()
    (root / "sweep" / "runs" / "ppo__CartPole-v1__s3").mkdir()
    (root / "sweep" / "runs" / "ppo__CartPole-v1__s3" / "checkpoint_256.json").write_text("{}")
    write_tables(root / "sweep", plan(spec, str(root / "sweep"))[0])
    return root, spec


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and not p.name.startswith(".")}


def states(spec: str, sweep: Path) -> list[str]:
    return [state for _, state in plan(spec, str(sweep))[2]]


def test_kept_records_restore_the_same_state_and_tables(finished, tmp_path):
    root, spec = finished
    summary = keep_records(root / "sweep", tmp_path / "kept")
    assert (summary.copied, summary.present, summary.unfinished) == (2, 0, 1)
    assert sorted(files(tmp_path / "kept")) == ["manifest.json", "runs/ppo__CartPole-v1__s1/result.json",
                                               "runs/ppo__CartPole-v1__s2/result.json",
                                               "status/ppo__CartPole-v1__s1.json", "status/ppo__CartPole-v1__s2.json"]
    summary = restore_records(tmp_path / "kept", tmp_path / "new")
    assert (summary.copied, summary.present, summary.unfinished) == (2, 0, 1)
    assert states(spec, tmp_path / "new") == ["done", "done", "new"]
    write_tables(tmp_path / "new", plan(spec, str(tmp_path / "new"))[0])
    for table in ("runs.csv", "results.csv"):
        assert (tmp_path / "new" / table).read_text() == (root / "sweep" / table).read_text()


def test_a_restored_sweep_runs_only_the_rest(finished, tmp_path):
    root, spec = finished
    keep_records(root / "sweep", tmp_path / "kept")
    restore_records(tmp_path / "kept", tmp_path / "new")
    summary = run_sweep(spec, out=str(tmp_path / "new"), workers=1, pack="1", progress=False)
    assert (summary.ran, summary.done, summary.failed) == (1, 3, 0)
    for name in ("s1", "s2"):  # the restored runs were not run again: still no events, no checkpoints
        assert sorted(p.name for p in (tmp_path / "new" / "runs" / f"ppo__CartPole-v1__{name}").iterdir()) == [
            "result.json"]


def test_keeping_again_writes_nothing_and_a_differing_record_is_refused(finished, tmp_path):
    root, _ = finished
    keep_records(root / "sweep", tmp_path / "kept")
    before = files(tmp_path / "kept")
    summary = keep_records(root / "sweep", tmp_path / "kept")
    assert (summary.copied, summary.present) == (0, 2)
    assert files(tmp_path / "kept") == before
    record = tmp_path / "kept" / "runs" / "ppo__CartPole-v1__s1" / "result.json"
    record.write_text(record.read_text().replace('"eval_return_mean"', '"eval_return_mean_x"'))
    damaged = files(tmp_path / "kept")
    with pytest.raises(ConfigError, match="differs from"):
        keep_records(root / "sweep", tmp_path / "kept")
    assert files(tmp_path / "kept") == damaged


def test_records_of_another_sweep_are_refused_both_ways(finished, tmp_path):
    root, _ = finished
    other = spec_file(tmp_path, steps=1024)
    run_sweep(other, out=str(tmp_path / "other"), workers=1, pack="1", progress=False)
    keep_records(root / "sweep", tmp_path / "kept")
    swept, kept = files(tmp_path / "other"), files(tmp_path / "kept")
    with pytest.raises(ConfigError, match="disagree on run ppo__CartPole-v1__s1 .*total_steps"):
        restore_records(tmp_path / "kept", tmp_path / "other")
    with pytest.raises(ConfigError, match="disagree on run"):
        keep_records(tmp_path / "other", tmp_path / "kept")
    assert files(tmp_path / "other") == swept and files(tmp_path / "kept") == kept


def test_a_run_the_destination_sweep_does_not_hold_is_refused(finished, tmp_path):
    root, _ = finished
    keep_records(root / "sweep", tmp_path / "kept")
    small = tmp_path / "small.toml"
    small.write_text(SPEC.format(steps=512).replace("seeds = 3", "seeds = 1"))
    run_sweep(str(small), out=str(tmp_path / "one"), workers=1, pack="1", progress=False)
    with pytest.raises(ConfigError, match="holds run ppo__CartPole-v1__s2, which the sweep of .* does not"):
        restore_records(tmp_path / "kept", tmp_path / "one")


def test_a_damaged_record_is_refused_before_anything_is_written(finished, tmp_path):
    root, _ = finished
    keep_records(root / "sweep", tmp_path / "kept")
    record = tmp_path / "kept" / "runs" / "ppo__CartPole-v1__s2" / "result.json"
    record.write_text(record.read_text()[:40])
    with pytest.raises(ConfigError, match="record of run ppo__CartPole-v1__s2 is damaged"):
        restore_records(tmp_path / "kept", tmp_path / "new")
    assert files(tmp_path / "new") == {}


def test_restoring_overwrites_nothing_and_waits_for_a_running_sweep(finished, tmp_path):
    root, spec = finished
    keep_records(root / "sweep", tmp_path / "kept")
    shutil.copytree(root / "sweep", tmp_path / "sweep")
    status = tmp_path / "sweep" / "status" / "ppo__CartPole-v1__s1.json"
    status.write_text('{"status": "failed", "error": "x"}')
    before = files(tmp_path / "sweep")
    with pytest.raises(ConfigError, match="differs from"):
        restore_records(tmp_path / "kept", tmp_path / "sweep")
    with sweep_lock(tmp_path / "sweep"), pytest.raises(ConfigError, match="in use by another rlkit sweep"):
        restore_records(tmp_path / "kept", tmp_path / "sweep")
    assert files(tmp_path / "sweep") == before
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is not a sweep directory"):
        restore_records(tmp_path / "kept", tmp_path / "plain")
    assert files(tmp_path / "plain") == {"notes.txt": b"mine"}


def test_the_command_refuses_bad_input_in_one_line(finished, tmp_path, capsys):
    root, _ = finished
    for argv, message in ((["keep", str(tmp_path / "missing"), str(tmp_path / "kept")], "has no manifest.json"),
                          (["restore", str(root / "sweep" / "manifest.json"), str(tmp_path / "new")],
                           "is not a records directory"),
                          (["keep", str(root / "sweep"), str(root / "sweep" / "manifest.json")], "is a file"),
                          (["copy", str(root / "sweep"), str(tmp_path / "kept")], "invalid choice")):
        assert main(["records", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("rlkit: error:") and message in err[0], err
    assert not (tmp_path / "kept").exists() and not (tmp_path / "new").exists()
    assert main(["records", "keep", str(root / "sweep"), str(tmp_path / "kept")]) == 0
    assert '"copied": 2' in capsys.readouterr().out


def test_kept_records_in_the_repository_are_not_ignored_by_git():
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    for path in ("experiments/outer_ppo/mujoco_runs/runs/ppo__Hopper-v5__s1/result.json",
                 "experiments/hp3o/mujoco_runs/status/ppo__Hopper-v5__s1.json",
                 "experiments/hp3o/mujoco_runs/manifest.json"):
        out = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
        assert out.returncode == 1, f"{path} is ignored by git"
    assert subprocess.run(["git", "check-ignore", "-q", "experiments/hp3o/mujoco_runs/.rlkit-records.lock"],
                          cwd=ROOT).returncode == 0


def test_a_sweep_directory_without_its_logs_and_status_folders_resumes(finished, tmp_path):
    root, spec = finished
    shutil.copytree(root / "sweep", tmp_path / "sweep")
    shutil.rmtree(tmp_path / "sweep" / "logs")
    shutil.rmtree(tmp_path / "sweep" / "status")
    shutil.rmtree(tmp_path / "sweep" / "runs" / "ppo__CartPole-v1__s3")  # the fixture's stand-in checkpoint
    summary = run_sweep(spec, out=str(tmp_path / "sweep"), workers=1, pack="1", progress=False)
    assert (summary.ran, summary.done, summary.failed) == (1, 3, 0)
    assert (tmp_path / "sweep" / "logs" / "ppo__CartPole-v1__s3.log").is_file()


@pytest.mark.parametrize("result", ['{}', '{"eval_history": 5, "total_steps": "x"}', "SEED2", "PAST"])
def test_a_result_that_is_not_the_runs_own_is_damaged(finished, tmp_path, result):
    root, _ = finished
    keep_records(root / "sweep", tmp_path / "kept")
    record = tmp_path / "kept" / "runs" / "ppo__CartPole-v1__s1" / "result.json"
    if result == "SEED2":
        result = (tmp_path / "kept" / "runs" / "ppo__CartPole-v1__s2" / "result.json").read_text()
    elif result == "PAST":
        result = record.read_text().replace('"total_steps": 512', '"total_steps": 100000')
    record.write_text(result)
    with pytest.raises(ConfigError, match="record of run ppo__CartPole-v1__s1 is damaged"):
        restore_records(tmp_path / "kept", tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_run_names_of_a_manifest_stay_inside_the_destination(finished, tmp_path):
    import json
    root, _ = finished
    keep_records(root / "sweep", tmp_path / "a" / "kept")
    manifest = tmp_path / "a" / "kept" / "manifest.json"
    stored = json.loads(manifest.read_text())
    stored["runs"]["../../x"] = stored["runs"]["ppo__CartPole-v1__s1"]
    manifest.write_text(json.dumps(stored))
    with pytest.raises(ConfigError, match="damaged manifest.json"):
        restore_records(tmp_path / "a" / "kept", tmp_path / "b" / "new")
    stored["runs"]["../../x"] = None
    with pytest.raises(ConfigError, match="damaged manifest.json"):
        restore_records(tmp_path / "a" / "kept", tmp_path / "b" / "new")


def test_a_copy_stopped_half_way_is_finished_by_the_same_command(finished, tmp_path, monkeypatch):
    import rlkit.ablation.records as records
    root, spec = finished
    real, calls, stop = records.write_atomic, [], [3]  # keep: its manifest, s1's result, then stopped

    def stop_at(path, text):
        calls.append(path)
        if len(calls) == stop[0]:
            raise KeyboardInterrupt
        real(path, text)

    monkeypatch.setattr(records, "write_atomic", stop_at)
    with pytest.raises(KeyboardInterrupt):  # keep stops between a run's result and its status
        keep_records(root / "sweep", tmp_path / "kept")
    monkeypatch.setattr(records, "write_atomic", real)
    assert restore_records(tmp_path / "kept", tmp_path / "half").unfinished == 3  # the half-kept run: not yet
    assert keep_records(root / "sweep", tmp_path / "kept").copied == 2
    calls.clear()
    stop[0] = 2  # restore: its manifest, then stopped
    monkeypatch.setattr(records, "write_atomic", stop_at)
    with pytest.raises(KeyboardInterrupt):
        restore_records(tmp_path / "kept", tmp_path / "new")
    monkeypatch.setattr(records, "write_atomic", real)
    assert restore_records(tmp_path / "kept", tmp_path / "new").copied == 2
    assert states(spec, tmp_path / "new") == ["done", "done", "new"]


def test_keep_refuses_a_running_sweep_and_a_folder_that_is_not_records(finished, tmp_path):
    root, _ = finished
    keep_records(root / "sweep", tmp_path / "kept")
    restore_records(tmp_path / "kept", tmp_path / "new")
    with sweep_lock(tmp_path / "new"), pytest.raises(ConfigError, match="in use by another rlkit sweep"):
        keep_records(tmp_path / "kept", tmp_path / "new")  # the arguments the wrong way round
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is not a records directory"):
        keep_records(root / "sweep", tmp_path / "plain")
    (tmp_path / "in_the_way" / "status" / "ppo__CartPole-v1__s1.json").mkdir(parents=True)
    with pytest.raises(ConfigError, match="in the way"):
        keep_records(root / "sweep", tmp_path / "in_the_way")


def test_the_same_directory_as_source_and_destination_is_refused(finished, tmp_path):
    root, _ = finished
    keep_records(root / "sweep", tmp_path / "kept")
    before = files(tmp_path / "kept")
    with pytest.raises(ConfigError, match="both the source and the destination"):
        restore_records(tmp_path / "kept", tmp_path / "kept" / ".")
    with pytest.raises(ConfigError, match="both the source and the destination"):
        keep_records(tmp_path / "kept", tmp_path / "kept")
    assert files(tmp_path / "kept") == before and not (tmp_path / "kept" / "logs").exists()


@pytest.mark.parametrize("field", ["git_commit", "machine", "created"])
def test_records_of_another_directory_of_the_same_spec_keep_their_provenance(finished, tmp_path, field):
    root, _ = finished
    keep_records(root / "sweep", tmp_path / "kept")
    twin = tmp_path / "twin"
    shutil.copytree(root / "sweep", twin)
    manifest = json.loads((twin / "manifest.json").read_text())
    manifest[field] = "elsewhere"
    (twin / "manifest.json").write_text(json.dumps(manifest))
    kept = files(tmp_path / "kept")
    with pytest.raises(ConfigError, match=f"another sweep directory \\({field} "):
        keep_records(twin, tmp_path / "kept")
    assert files(tmp_path / "kept") == kept
