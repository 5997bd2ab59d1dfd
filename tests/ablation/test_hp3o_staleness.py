"""``rlkit report staleness`` (and the event reading it shares with ``rlkit report scalars`` and
``rlkit report tags``) on damaged sweeps: a resumed run's files read as TensorBoard
reads them, runs without events, with a damaged event file or no final return are left out and
named, and a sweep with nothing to read is refused in one line with nothing appended."""

import csv
import json
from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

FIELDS = ["variant", "env", "seed", "kind", "status", "final_return", "run_dir"]


def events(run_dir: Path, name: str, points: dict[int, float]) -> Path:
    """One event file named ``events.out.tfevents.<name>`` with ``hp3o/sampled_age`` at ``points``."""
    scratch = run_dir / f"w{name}"
    writer = SummaryWriter(str(scratch))
    for step, value in points.items():
        writer.add_scalar("hp3o/sampled_age", value, step)
    writer.close()
    (produced,) = scratch.glob("events.out.tfevents.*")
    target = run_dir / f"events.out.tfevents.{name}"
    produced.rename(target)
    scratch.rmdir()
    return target


@pytest.fixture
def staleness(report_tool):
    return report_tool("staleness")


def sweep(tmp_path: Path, runs: list[dict]) -> Path:
    root = tmp_path / "sweep"
    (root / "runs").mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({"spec": {}, "budget": None}))  # what marks a sweep folder
    with open(root / "runs.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        for i, run in enumerate(runs, 1):
            writer.writerow({"variant": "hp3o", "env": "E-v0", "seed": i, "kind": "rlkit", "status": "done",
                             "final_return": "10", "run_dir": f"runs/r{i}", **run})
            (root / "runs" / f"r{i}").mkdir()
    return root


def test_a_resumed_run_reads_as_tensorboard_does_and_damaged_runs_are_named(staleness, tmp_path):
    root = sweep(tmp_path, [{}, {}, {}, {}, {"final_return": ""}])
    events(root / "runs" / "r1", "1000.a", {1: 1.0, 2: 1.0, 3: 100.0, 4: 100.0})  # killed after step 4
    events(root / "runs" / "r1", "1001.a", {3: 3.0})  # resumed from step 2's checkpoint: 1, 1, 3
    truncated = events(root / "runs" / "r2", "1000.a", {1: 50.0, 2: 50.0})
    truncated.write_bytes(truncated.read_bytes()[:-7])
    (root / "runs" / "r3" / "events.out.tfevents.1000.a").write_bytes(b"\x07" * 500)
    events(root / "runs" / "r5", "1000.a", {1: 50.0})
    # r4 has no events (records kept without them)
    code, out, err = staleness(root)
    assert code == 0 and "Traceback" not in err
    row = next(line for line in out.splitlines() if line.startswith("| E-v0 | hp3o |"))
    cells = [c.strip() for c in row.split("|")]
    assert cells[3] == "1" and cells[6] == f"{5 / 3:.3g}"  # seeds, mean age of r1 only
    assert "Left out, no TensorBoard events (records kept without them): 1 runs (E-v0 hp3o)." in out
    assert "Left out, unreadable (ValueError): 2 runs (runs/r2, runs/r3)." in out
    assert "Left out, no finite final return: 1 runs (runs/r5)." in out
    assert "No run logged HP3O's replay diagnostics" not in out


def test_a_sweep_without_hp3o_and_an_unlogged_tag_say_so(staleness, report_tool, tmp_path):
    root = sweep(tmp_path, [{"variant": "ppo"}])
    writer = SummaryWriter(str(root / "runs" / "r1"))
    writer.add_scalar("losses/approx_kl", 0.01, 1)
    writer.close()
    code, out, err = staleness(root)
    assert code == 0 and "No run logged HP3O's replay diagnostics (the sweep has no HP3O variant)" in out
    code, out, err = report_tool("tags")(root, "--tags", "losses/approx_kl", "no/such_tag")
    assert code == 0 and "No run logged no/such_tag." in out and "No run logged losses/approx_kl" not in out


@pytest.mark.parametrize("case", ["no runs.csv", "nothing readable", "header only", "no manifest"])
def test_a_sweep_with_nothing_to_read_is_refused_and_nothing_is_appended(staleness, tmp_path, case):
    root = sweep(tmp_path, [{}, {}])
    if case == "no runs.csv":
        (root / "runs.csv").unlink()
    if case == "header only":
        (root / "runs.csv").write_text(",".join(FIELDS) + "\n")
    if case == "no manifest":  # a runs.csv outside a sweep folder
        events(root / "runs" / "r1", "1000.a", {1: 1.0})
        (root / "manifest.json").unlink()
    results = tmp_path / "R.md"
    results.write_text("# earlier\n")
    code, out, err = staleness(root, "--write", results)
    assert code == 2 and not out and "Traceback" not in err
    assert err.startswith("rlkit: error: ") and len(err.strip().splitlines()) == 1
    assert ("is not a sweep directory (no manifest.json)" in err) == (case == "no manifest")
    assert results.read_text() == "# earlier\n"


def test_the_other_event_readers_share_the_reading(report_tool, tmp_path):
    root = sweep(tmp_path, [{}, {}])
    events(root / "runs" / "r1", "1000.a", {1: 1.0, 2: 1.0, 3: 100.0})
    events(root / "runs" / "r1", "1001.a", {3: 4.0})  # resumed from step 2
    code, out, err = report_tool("scalars")(root / "runs" / "r1", "--tags", "hp3o/sampled_age", "--k", "1")
    assert code == 0 and "n=   3" in out and "first1=        1 last1=        4" in out
    code, out, err = report_tool("scalars")(root / "runs" / "r2")
    assert code == 2 and err.startswith("rlkit: error: no TensorBoard event file") and len(err.splitlines()) == 1
    code, out, err = report_tool("tags")(root, "--tags", "hp3o/sampled_age", "--k", "1")
    assert code == 0 and "Left out, no readable TensorBoard events: 1 runs." in out
    assert "| hp3o | E-v0 | hp3o/sampled_age | 1 | 1 | 4 |" in out
    events(root / "runs" / "r1", "1002.a", {4: 2.5e-4})  # a learning rate's size keeps its digits
    code, out, err = report_tool("scalars")(root / "runs" / "r1", "--tags", "hp3o/sampled_age", "--k", "1")
    assert code == 0 and "last1=  0.00025" in out
