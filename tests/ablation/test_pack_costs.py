"""runs.csv of a packed sweep: the pack's seconds and rate are named as the pack's, each run gets
its share, and records written before statuses named their pack still read as packs."""

import json

import pytest

from rlkit.ablation.report import write_report
from rlkit.ablation.results import claim_sweep_dir, write_tables
from rlkit.ablation.spec import expand
from rlkit.ablation.sweep import run_sweep
from tests.ablation.test_sweep import SPEC, rows, write_spec

PACKED = SPEC.replace('"sb3:ppo" = {}\n"sb3-contrib:trpo" = {}\n', "").replace("seeds = 2", "seeds = 3")


def test_a_packed_runs_row_names_its_packs_figures_and_gives_it_its_share(tmp_path):
    out = tmp_path / "out"
    assert run_sweep(write_spec(tmp_path, PACKED), str(out), workers=1, progress=False).done == 6
    table = rows(out / "runs.csv")
    for variant in ("ppo", "outer"):
        pack = [r for r in table if r["variant"] == variant]
        assert {r["pack_size"] for r in pack} == {"3"}
        assert len({r["pack_train_seconds"] for r in pack}) == 1  # one process, one clock
        for r in pack:
            seconds = float(r["pack_train_seconds"])
            assert float(r["train_seconds"]) == pytest.approx(seconds / 3)
            assert float(r["pack_steps_per_second"]) == pytest.approx(3 * int(r["total_steps"]) / seconds)
            assert float(r["steps_per_second"]) == pytest.approx(int(r["total_steps"]) / float(r["train_seconds"]))
            status = json.loads((out / "status" / f"{variant}__CartPole-v1__s{r['seed']}.json").read_text())
            assert sorted(status["pack"]) == [f"{variant}__CartPole-v1__s{s}" for s in (1, 2, 3)]
            assert float(r["run_seconds"]) == pytest.approx(status["seconds"] / 3)
    report = open(write_report(str(out), reps=100)["report"]).read()
    assert "counts 1/K of its pack's training seconds" in report


def test_records_without_packs_named_read_their_packs_from_the_shared_seconds(tmp_path):
    """Statuses as packed sweeps wrote them before they named the pack: a pack's members share one
    ``seconds``; a run alone has its own."""
    spec = expand({"name": "t", "envs": ["CartPole-v1"], "seeds": 3, "preset": "cartpole", "total_steps": 1024,
                   "variants": {"ppo": {}, "sb3:ppo": {}}})
    out = tmp_path / "out"
    claim_sweep_dir(out, spec, None)
    for run in spec.runs:
        (out / "runs" / run.name).mkdir()
        result = {"total_steps": 1024, "steps_per_second": 1024 / 6.0, "eval_return_mean": 100.0,
                  "eval_history": [[1024, 100.0, 0.0]]}
        (out / "runs" / run.name / "result.json").write_text(json.dumps(result))
        seconds = 9.0 if run.kind == "rlkit" else 7.0 + run.seed  # the ppo pack's shared seconds; sb3 alone
        (out / "status" / f"{run.name}.json").write_text(json.dumps({"status": "done", "seconds": seconds}))
    write_tables(out, spec)
    table = {(r["variant"], r["seed"]): r for r in rows(out / "runs.csv")}
    ppo, alone = table[("ppo", "2")], table[("sb3:ppo", "2")]
    assert (ppo["pack_size"], float(ppo["pack_train_seconds"]), float(ppo["train_seconds"])) == ("3", 6.0, 2.0)
    assert (float(ppo["run_seconds"]), float(ppo["pack_steps_per_second"])) == (3.0, pytest.approx(3 * 1024 / 6))
    assert (alone["pack_size"], float(alone["train_seconds"]), float(alone["run_seconds"])) == ("1", 6.0, 9.0)
    assert float(alone["steps_per_second"]) == float(alone["pack_steps_per_second"]) == pytest.approx(1024 / 6)


TWICE = '{"status": "done", "seconds": 9.0, "pack": ["ppo__CartPole-v1__s2", "ppo__CartPole-v1__s2"]}'
ALIEN = '{"status": "done", "seconds": 9.0, "pack": ["ppo__CartPole-v1__s2", "sb3:ppo__CartPole-v1__s1"]}'


@pytest.mark.parametrize("damaged", ['{"status": "done", "seconds": "9"}', '{"status": "done", "pack": "ppo"}',
                                     '["done"]', "{not json", TWICE, ALIEN])
def test_a_damaged_status_leaves_its_runs_costs_empty_and_says_so(tmp_path, damaged):
    """A packed member whose status file is of another shape read as a run alone (pack_size 1, its
    pack's whole seconds as its own), with no word."""
    spec = expand({"name": "t", "envs": ["CartPole-v1"], "seeds": 3, "preset": "cartpole", "total_steps": 1024,
                   "variants": {"ppo": {}}})
    out = tmp_path / "out"
    claim_sweep_dir(out, spec, None)
    names = [run.name for run in spec.runs]
    for run in spec.runs:
        (out / "runs" / run.name).mkdir()
        result = {"total_steps": 1024, "steps_per_second": 1024 / 6.0, "eval_return_mean": 100.0 + run.seed,
                  "eval_history": [[1024, 100.0 + run.seed, 0.0]]}
        (out / "runs" / run.name / "result.json").write_text(json.dumps(result))
        (out / "status" / f"{run.name}.json").write_text(json.dumps({"status": "done", "seconds": 9.0, "pack": names}))
    (out / "status" / f"{names[1]}.json").write_text(damaged)
    write_tables(out, spec)
    table = {r["seed"]: r for r in rows(out / "runs.csv")}
    assert table["2"]["status"] == "done" and table["2"]["final_return"] == "102.0"  # its score still counts
    assert all(table["2"][k] == "" for k in ("pack_size", "train_seconds", "run_seconds", "steps_per_second"))
    assert f"status/{names[1]}.json" in table["2"]["error"] and "cost columns are left empty" in table["2"]["error"]
    assert table["1"]["pack_size"] == table["3"]["pack_size"] == "3" and table["1"]["error"] == ""
    written = write_report(str(out), reps=100)  # results without evaluation times: no wall-clock curves
    assert "curves_steps.png" in written["figures"] and "curves_wallclock.png" not in written["figures"]
    report = open(written["report"]).read()
    assert "Left out of train s and steps/s" in report and "ppo / CartPole-v1 / seed 2" in report
    assert "| CartPole-v1 | ppo | 3 |" in report and "| 2.0 |" in report  # the others' share: 6 s / 3
