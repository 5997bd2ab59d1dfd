"""``rlkit report walltime`` under bad input: every refusal is one line (exit 2) before anything
is measured, failed or unfinished runs and runs without events are left out and named, and
``--write`` only ever appends."""

import json

import pytest
from torch.utils.tensorboard import SummaryWriter

from rlkit.ablation import walltime as module
from rlkit.ablation.results import claim_sweep_dir
from rlkit.ablation.spec import expand

SPEC = {"name": "t", "envs": ["CartPole-v1"], "seeds": 3, "preset": "cartpole", "total_steps": 1024,
        "variants": {"ppo": {}}}


@pytest.fixture
def walltime(report_tool):
    """``rlkit report walltime ARGS``: its exit code and what it printed to stdout and stderr."""
    run = report_tool("walltime")
    return lambda args, capsys: run(*args)


@pytest.fixture
def sweep(tmp_path):
    """Seed 1 done with events, seed 2 done with none (records restored elsewhere), seed 3 failed."""
    out = tmp_path / "sweep"
    spec = expand(SPEC)
    claim_sweep_dir(out, spec, None)
    one, two, three = spec.runs
    (out / "runs" / two.name).mkdir()
    writer = SummaryWriter(str(out / "runs" / one.name))
    for i, wall in enumerate((2e9, 2e9 + 30, 2e9 + 90)):
        writer.add_scalar("charts/x", 1.0, i, walltime=wall)
    writer.close()
    for run, status in ((one, {"status": "done", "seconds": 90.0}), (two, {"status": "done", "seconds": 60.0}),
                        (three, {"status": "failed", "error": "boom"})):
        (out / "status" / f"{run.name}.json").write_text(json.dumps(status))
    return out


@pytest.mark.parametrize("args", [
    ["--write", "{tmp}"], ["--write", "{tmp}/no/R.md"], ["--workers", "0"], ["--gap", "-1"], ["--gap", "nan"],
    ["--envs", ","], ["--envs", " "], ["--envs", "Nope"], ["--envs", "cartpole-v1"],
    ["--measure-steps", "100"], ["--measure-steps", "-5"],
])
def test_bad_input_is_refused_before_anything_is_measured(walltime, sweep, tmp_path, capsys, args):
    code, out, err = walltime([sweep, "--measure-steps", "50000",
                               *[a.format(tmp=tmp_path) for a in args]], capsys)
    assert code == 2 and err.startswith("rlkit: error: ") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err and not out


@pytest.mark.parametrize("damage", ["missing", "empty", "truncated manifest", "a file"])
def test_a_folder_that_is_not_a_sweep_is_refused(walltime, sweep, tmp_path, capsys, damage):
    target = {"missing": tmp_path / "nothing", "empty": tmp_path / "empty", "a file": sweep / "manifest.json",
              "truncated manifest": sweep}[damage]
    if damage == "empty":
        target.mkdir()
    if damage == "truncated manifest":
        text = (sweep / "manifest.json").read_text()
        (sweep / "manifest.json").write_text(text[: len(text) // 2])
    code, _, err = walltime([target, "--measure-steps", "0"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not a readable sweep folder" in err


def test_failed_and_eventless_runs_are_named_and_the_file_is_only_appended_to(walltime, sweep, tmp_path, capsys):
    results = tmp_path / "RESULTS.md"
    results.write_text("# earlier\nno final newline")
    code, out, _ = walltime([sweep, "--measure-steps", "0", "--envs", " CartPole-v1 ", "--write", results], capsys)
    assert code == 0
    text = results.read_text()
    assert text.startswith("# earlier\nno final newline\n") and out.strip() in text
    row = next(line for line in out.splitlines() if line.startswith("| 2 |"))  # the failed run is left out
    assert row.split("|")[2].strip() == "0.03"  # seed 1's 90 s of events
    assert "pool" not in out and "nan" not in row
    assert "Left out, not finished or failed: 1 runs (ppo__CartPole-v1__s3)" in out
    assert "No TensorBoard events on this machine for 1 of the 2 runs" in out
    assert "--envs CartPole-v1`" in out


def test_the_rlkit_runs_share_is_stated_apart_from_the_baselines(walltime, tmp_path, capsys, monkeypatch):
    out = tmp_path / "sweep"
    spec = expand({**SPEC, "variants": {"ppo": {}, "sb3:ppo": {}}})
    claim_sweep_dir(out, spec, None)
    for run in spec.runs:  # the ppo pack ran 90 s; each baseline 50 s alone
        seconds = 90.0 if run.kind == "rlkit" else 50.0
        (out / "status" / f"{run.name}.json").write_text(json.dumps({"status": "done", "seconds": seconds}))
    monkeypatch.setattr(module, "alone_seconds", lambda config, steps: 100.0)
    code, text, _ = walltime([out, "--measure-steps", "50000"], capsys)
    assert code == 0
    # all six runs: packs 90 s beside 3 x 50 s on two workers, in order -> 140 s; the pool: 3 x 100 s and
    # 3 x 50 s longest first -> 250 s
    row = next(line for line in text.splitlines() if line.startswith("| 6 |"))
    assert row.split("|")[-2].strip() == f"{250 / 140:.2f}×"
    # the three rlkit runs alone: their one pack 90 s against 3 x 100 s on two workers (200 s)
    assert ("The 3 rlkit runs alone (the 3 baselines run one per process either way): packs' recorded seconds "
            f"{90 / 3600:.2f} h on the workers, pool estimate {200 / 3600:.2f} h, {200 / 90:.2f}×.") in text


@pytest.mark.parametrize("value", ["0.0", "-90", "NaN", "Infinity", "true", "\"90\"", "null"])
def test_a_status_with_seconds_that_are_not_a_positive_number_is_left_out_and_named(
        walltime, sweep, capsys, monkeypatch, value):
    name = expand(SPEC).runs[1].name
    (sweep / "status" / f"{name}.json").write_text('{"status": "done", "seconds": %s}' % value)
    monkeypatch.setattr(module, "alone_seconds", lambda config, steps: 100.0)
    code, out, err = walltime([sweep, "--measure-steps", "50000"], capsys)
    assert code == 0 and "Traceback" not in err
    assert f"Left out, not finished or failed: 2 runs ({name}, " in out
    row = next(line for line in out.splitlines() if line.startswith("| 1 |"))
    assert "inf" not in row and "nan" not in row and row.split("|")[-2].strip() == f"{100 / 90:.2f}×"


def test_a_sweep_with_nothing_finished_is_refused_in_one_line(walltime, sweep, capsys):
    for status in (sweep / "status").iterdir():
        status.unlink()
    code, out, err = walltime([sweep, "--measure-steps", "50000"], capsys)
    assert code == 2 and not out and "Traceback" not in err
    assert err == (f"rlkit: error: no finished run in {sweep} (3 failed, unfinished or with a damaged status "
                   "file)\n")


def test_the_pool_estimate_is_measured_for_real_at_a_tiny_budget(walltime, tmp_path, capsys):
    """The real measurement (no stub) at one update of each (variant, env), scaled to a long
    budget: its figures are finite and positive and the table's pool is the per-(variant, env)
    times on two workers, longest first (times themselves are not checked)."""
    import re

    out = tmp_path / "sweep"
    spec = expand({**SPEC, "total_steps": 512 * 10_000,
                   "variants": {"ppo": {}, "outer": {"presets": ["outer-nesterov"]}}})
    claim_sweep_dir(out, spec, None)
    packs = {"ppo": 100.0, "outer": 300.0}  # each (variant, env)'s pack's seconds, in each of its runs' status
    for run in spec.runs:
        (out / "status" / f"{run.name}.json").write_text(json.dumps({"status": "done", "seconds": packs[run.variant]}))
    code, text, err = walltime([out, "--measure-steps", "512", "--workers", "2"], capsys)
    assert code == 0, err
    alone = dict(re.findall(r"(ppo|outer) CartPole-v1 ([0-9.]+) min", text))
    minutes = {v: float(m) for v, m in alone.items()}
    assert set(minutes) == {"ppo", "outer"} and all(0 < m < float("inf") for m in minutes.values()), text
    row = next(line for line in text.splitlines() if line.startswith("| 6 |")).split("|")
    packs_h, pool_h, ratio = float(row[4]), float(row[5]), float(row[6].strip().rstrip("×"))
    expected = module.pool_seconds([minutes["ppo"] * 60] * 3 + [minutes["outer"] * 60] * 3, 2)
    assert packs_h == round(300 / 3600, 2)  # the two packs side by side on the two workers
    assert abs(pool_h * 3600 - expected) <= 0.005 * 3600 + 3 * 3  # table and per-pair figures rounded
    assert ratio == pytest.approx(pool_h * 3600 / 300.0, rel=0.01)
    no_evals = module.measure_config({**spec.runs[0].config, "eval_every": 0}, 512, str(tmp_path))
    assert no_evals.eval_every == 0 and no_evals.total_steps == 512  # a run without periodic evaluations has none
