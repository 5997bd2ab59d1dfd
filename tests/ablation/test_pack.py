"""``rlkit sweep --pack``: the seeds of one (variant, env) train in one process as a population;
each run is the population member it would be trained alone as one, the tables are a sweep's, and a
sweep killed with SIGKILL resumes to the same results whether it resumes packed or alone."""

import pytest

import rlkit
from rlkit.ablation.packing import check_pack, pack_runs
from rlkit.ablation.spec import load_spec
from rlkit.ablation.sweep import run_sweep
from rlkit.errors import ConfigError
from rlkit.gym.population import is_member, train_population
from tests.ablation.test_sweep import SPEC, rows, sigkill_mid_sweep, write_spec
from tests.robustness.helpers import error_line, run_cli
from tests.test_reproducibility import assert_same_bits, final_tensors

ON_CPU = SPEC.replace("num_envs = 2\n", 'num_envs = 2\ndevice = "cpu"\n')
"""Bits are compared on the CPU: on CUDA a population's batched kernels give each member its own
run within rounding (tests/gym/population/test_cuda.py), not bit for bit."""
PACKED = ON_CPU.replace('"sb3-contrib:trpo" = {}\n', 'hp3o = { presets = ["hp3o"] }\n') \
    .replace("seeds = 2", "seeds = 3")


def test_packed_runs_are_population_members_and_the_tables_a_sweeps(tmp_path):
    spec = write_spec(tmp_path, PACKED)
    summary = run_sweep(spec, str(tmp_path / "out"), workers=1, progress=False)
    assert summary.done == summary.total == 12 and summary.ran == 12
    runs = tmp_path / "out" / "runs"
    packed = {d.name for d in runs.iterdir() if (d / "population.json").is_file()}
    assert packed == {f"{v}__CartPole-v1__s{s}" for v in ("ppo", "outer", "hp3o") for s in (1, 2, 3)}  # SB3 alone
    assert {r["status"] for r in rows(tmp_path / "out" / "runs.csv")} == {"done"}
    for variant in ("ppo", "hp3o"):
        run = next(r for r in load_spec(spec).runs if r.variant == variant and r.seed == 2)
        cfg = rlkit.TrainConfig.from_dict({**run.config, "logdir": str(tmp_path / "alone"), "run_name": variant,
                                           "torch_threads": 1, "progress": False})
        (alone,) = train_population(cfg, [2])
        assert_same_bits(final_tensors(runs / run.name), final_tensors(alone.run_dir))
    log = (tmp_path / "out" / "logs" / "ppo__CartPole-v1__s2.log").read_text()
    assert "trained in one process with ppo__CartPole-v1__s1, ppo__CartPole-v1__s3" in log


def test_packing_splits_groups_across_workers_and_keeps_what_a_population_cannot_train_alone(tmp_path):
    runs = load_spec(write_spec(tmp_path, PACKED)).runs
    out = tmp_path / "runs"
    auto = pack_runs(runs, out, None, workers=1)
    assert sorted(len(i) if isinstance(i, list) else 1 for i in auto) == [1, 1, 1, 3, 3, 3]
    six = pack_runs(runs, out, None, workers=6)  # three groups, two workers each
    assert sorted(len(i) if isinstance(i, list) else 1 for i in six) == [1, 1, 1, 1, 1, 1, 2, 2, 2]
    assert pack_runs(runs, out, 1, workers=6) == runs
    (out / "ppo__CartPole-v1__s1").mkdir(parents=True)
    (out / "ppo__CartPole-v1__s1" / "config.json").write_text("{}")  # started alone: it resumes alone
    started = pack_runs(runs, out, 2, workers=1)
    assert next(r for r in runs if r.name == "ppo__CartPole-v1__s1") in started


@pytest.mark.parametrize("bad", ["0", "-2", "x", "2.5", "", "03"])
def test_a_bad_pack_is_one_line_and_writes_nothing(tmp_path, bad):
    spec = write_spec(tmp_path, PACKED)
    line = error_line(run_cli("sweep", spec, "--out", str(tmp_path / "out"), "--pack", bad))
    assert "--pack" in line and not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="--pack"):
        check_pack(bad)
    assert check_pack("auto") is None and check_pack("4") == 4 and check_pack(4) == 4


def test_a_packed_sweep_killed_with_sigkill_resumes_alone_or_packed_to_the_same_results(tmp_path):
    spec = write_spec(tmp_path, ON_CPU.replace('"sb3:ppo" = {}\n"sb3-contrib:trpo" = {}\n', "")
                      .replace("total_steps = 1024", "total_steps = 8192"))
    out = tmp_path / "out"
    # Every run started as a member (a run that had not started would train with --pack 1 as a
    # single run, whose numbers are not a member's), so each resumes as a population of one.
    sigkill_mid_sweep(spec, out, "--pack", "2")
    assert all(is_member(d) for d in (out / "runs").iterdir()) and len(list((out / "runs").iterdir())) == 4
    resumed = run_sweep(spec, str(out), workers=2, progress=False, pack=1)  # each member alone
    straight = run_sweep(spec, str(tmp_path / "straight"), workers=2, progress=False, pack=2)
    key = lambda r: (r["variant"], r["seed"], r["step"])  # noqa: E731
    a = {key(r): r["eval_return_mean"] for r in rows(out / "results.csv")}
    b = {key(r): r["eval_return_mean"] for r in rows(tmp_path / "straight" / "results.csv")}
    failed = [p.read_text() for p in (out / "status").glob("*.json") if "failed" in p.read_text()]
    assert resumed.done == straight.done == 4 and a == b and len(a) == 4 * 16, failed
    for run_dir in (tmp_path / "straight" / "runs").iterdir():
        assert_same_bits(final_tensors(run_dir), final_tensors(out / "runs" / run_dir.name))


def test_runs_killed_while_their_population_started_up_train_anew_packed(tmp_path):
    """A kill between a member's folder (its lock) and its first file leaves folders holding only
    the lock: nothing of the run was written, so it starts again, in its pack."""
    from rlkit.ablation.results import claim_sweep_dir
    from rlkit.io.lock import RUN_LOCK

    spec = write_spec(tmp_path, PACKED)
    claim_sweep_dir(tmp_path / "out", load_spec(spec), None)  # the sweep had started
    runs = tmp_path / "out" / "runs"
    for seed in (1, 2):
        (runs / f"ppo__CartPole-v1__s{seed}").mkdir(parents=True)
        (runs / f"ppo__CartPole-v1__s{seed}" / RUN_LOCK).write_text("")
    summary = run_sweep(spec, str(tmp_path / "out"), workers=1, progress=False)
    assert summary.done == 12 and summary.failed == 0
    assert all((runs / f"ppo__CartPole-v1__s{s}" / "population.json").is_file() for s in (1, 2, 3))
