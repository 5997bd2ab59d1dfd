"""Sweeps under hostile use: specs whose runs would share a folder or that are wrongly typed,
damaged or half-written files, a second sweep into the same directory, signals to the sweep's
own pid, and reports of NaN, inf, disjoint or below-random results. Each case is a one-line
error or a correct result, and nothing already written changes."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlkit.ablation import figures
from rlkit.ablation.report import write_report
from rlkit.ablation.results import claim_sweep_dir, write_tables
from rlkit.ablation.runner import run_state
from rlkit.ablation.spec import expand
from rlkit.ablation.sweep import sweep_lock
from rlkit.cli import main
from rlkit.errors import ConfigError
from rlkit.io.files import read_json, write_atomic
from tests.processes import children, wait_gone

ROOT = Path(__file__).parents[2]
BASE = {"name": "t", "envs": ["CartPole-v1"], "seeds": 2, "preset": "cartpole", "total_steps": 1024,
        "variants": {"ppo": {}}}


def toml(spec: dict) -> str:
    """A spec as TOML (tables last, as TOML requires)."""
    def value(v):
        if isinstance(v, dict):
            return "{ " + ", ".join(f'"{k}" = {value(x)}' for k, x in v.items()) + " }"
        return json.dumps(v)
    plain = [f"{k} = {value(v)}" for k, v in spec.items() if not isinstance(v, dict)]
    tables = [f"[{k}]\n" + "\n".join(f'"{n}" = {value(t)}' for n, t in v.items())
              for k, v in spec.items() if isinstance(v, dict)]
    return "\n".join(plain + tables) + "\n"


def spec_file(tmp_path, spec=None, name="spec.toml"):
    path = tmp_path / name
    path.write_text(toml(spec or BASE))
    return str(path)


# ------------------------------------------------------------------ one folder per run
@pytest.mark.parametrize("change", [
    {"variants": {"a/b": {}, "a-b": {}}},  # two names, one folder name
    {"variants": {"Fast": {}, "fast": {}}},  # one folder on macOS and Windows filesystems
    {"envs": ["CartPole-v1", "CartPole-v1"]},
    {"grid": {"clip_coef": [0.1, 0.2, 0.1]}},
])
def test_runs_that_would_share_a_folder_are_refused(change):
    with pytest.raises(ConfigError) as e:
        expand({**BASE, **change}, "spec.toml")
    assert "spec.toml" in str(e.value) and ("folder" in str(e.value) or "twice" in str(e.value))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("change,key", [
    ({"name": "."}, "name"), ({"name": ".."}, "name"), ({"name": "-x"}, "name"), ({"variants": {"": {}}}, "variants"),
    ({"variants": {" ": {}}}, "variants"),
    ({"variants": {"x": {"presets": 5}}}, "variants.x"), ({"variants": {"x": {"outer_lr": "1.5"}}}, "outer_lr"),
    ({"variants": {"x": {"hp3o": "false"}}}, "hp3o"), ({"grid": {"clip_coef": [0.1, "x"]}}, "clip_coef"),
    ({"env": "CartPole-v1"}, "env"), ({"env": {"Hopper-v5": {"ent_coef": 0.0}}}, "env.Hopper-v5"),
    ({"reference": {"Acrobot-v1": {"random": 0.0, "reference": 1.0}}}, "reference.Acrobot-v1"),
    ({"reference": {"CartPole-v1": {"random": True, "reference": 1.0}}}, "reference.CartPole-v1"),
    ({"reference": {"CartPole-v1": {"random": 0.0, "reference": math.inf}}}, "reference.CartPole-v1"),
    ({"variants": {"sb3:ppo": {"outer_lr": 1.5}}}, "outer_lr"), ({"variants": {"sb3:ppo": {"hp3o": True}}}, "hp3o"),
    ({"variants": {"sb3:ppo": {"presets": ["hp3o"]}}}, "variants.sb3:ppo"),
    ({"variants": {"x": {"num_envs": 2, "num_steps": 4, "num_minibatches": 8}}}, "minibatches of one sample"),
    ({"variants": {"x": {"hp3o": True, "hp3o_samples": 6, "num_minibatches": 6, "hp3o_trajectories": 5}}},
     "minibatches of one sample"),
    ({"variants": {"x": {"hp3o": True, "hp3o_samples": 2, "num_minibatches": 1, "hp3o_trajectories": 5}}},
     "hp3o_samples=2 is smaller"),
])
def test_wrongly_typed_or_stray_spec_values_are_one_line_errors(change, key):
    with pytest.raises(ConfigError) as e:
        expand({**BASE, **change}, "spec.toml")
    assert key in str(e.value) and "\n" not in str(e.value)


def test_an_unknown_env_is_refused_before_anything_is_written(tmp_path, capsys):
    spec = spec_file(tmp_path, {**BASE, "envs": ["CartPole-v1", "NoSuchEnv-v0"]})
    out = tmp_path / "out"
    assert main(["sweep", spec, "--out", str(out)]) == 2
    assert main(["sweep", spec, "--out", str(out), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "NoSuchEnv-v0" in err and len(err.strip().splitlines()) == 2 and not out.exists()


@pytest.mark.parametrize("change", [{"env_wrappers": "atari"}, {"grid": {"env_wrappers": ["", "atari"]}}])
def test_a_wrapper_stack_the_env_cannot_take_is_refused_before_anything_is_written(tmp_path, capsys, change):
    spec = spec_file(tmp_path, {**BASE, **change})
    out = tmp_path / "out"
    for dry in (["--dry-run"], []):
        assert main(["sweep", spec, "--out", str(out), *dry]) == 2
    err = capsys.readouterr().err
    assert "CartPole-v1" in err and len(err.strip().splitlines()) == 2 and not out.exists()


@pytest.mark.parametrize("where", ["top", "variant", "grid"])
def test_a_memory_on_an_env_that_gives_action_masks_is_refused_before_anything_is_written(tmp_path, capsys, where):
    change = {"top": {"memory": "gru"}, "variant": {"variants": {"ppo": {}, "gru": {"memory": "gru"}}},
              "grid": {"grid": {"memory": ["", "gru"]}}}[where]
    masked = {**BASE, "envs": ["CartPole-v1", "rlkit-test/MaskedFatalInfo-v0"], **change}
    spec, out = spec_file(tmp_path, masked), tmp_path / "out"
    for dry in (["--dry-run"], []):
        assert main(["sweep", spec, "--out", str(out), *dry]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all('memory = "gru" does not read action masks yet; rlkit-test/MaskedFatalInfo-v0 '
                                 "gives them" in line for line in err), err
    assert not out.exists()
    feed_forward = spec_file(tmp_path, {**masked, "grid": {}, "variants": {"ppo": {}}, "memory": ""}, "ff.toml")
    assert main(["sweep", feed_forward, "--out", str(out), "--dry-run"]) == 0  # the masked env alone is fine


@pytest.mark.parametrize("flags,words", [
    (["--workers", "0"], "--workers"), (["--workers", "-1"], "--workers"), (["--workers", "x"], "--workers"),
    (["--backend", "slurm"], "--backend"), (["--bogus"], "--bogus"), (["--out", ""], "--out"),
])
def test_bad_sweep_flags_are_one_line(tmp_path, capsys, flags, words):
    out = tmp_path / "out"
    assert main(["sweep", spec_file(tmp_path), "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlkit: error:") and words in err and "\n" not in err and not out.exists()


@pytest.mark.parametrize("flags,words", [(["--gpus-per-run", "-1", "--backend", "ray"], "gpus-per-run"),
                                         (["--gpus-per-run", "nan", "--backend", "ray"], "gpus-per-run"),
                                         (["--gpus-per-run", "0.5"], "applies to --backend ray")])
def test_gpu_shares_are_checked_before_anything_is_written_dry_run_too(tmp_path, capsys, flags, words):
    for dry in ([], ["--dry-run"]):
        assert main(["sweep", spec_file(tmp_path), "--out", str(tmp_path / "o"), *flags, *dry]) == 2
        assert words in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_parser_errors_of_every_command_are_one_line(capsys):
    for argv in (["sweep"], ["report"], ["eval"], ["report", "x", "--reps", "many"], ["train", "--clip-coef", "abc"],
                 ["train", "--no-such-flag"], ["rlhf", "--num-envs", "two"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("rlkit: error:") and "\n" not in err and "--help" in err, (argv, err)


# ------------------------------------------------------------------ what is on disk
def test_dry_run_of_a_changed_spec_is_refused_like_the_real_run(tmp_path, capsys):
    out = tmp_path / "out"
    claim_sweep_dir(out, expand(BASE), None)
    before = (out / "manifest.json").read_text()
    changed = spec_file(tmp_path, {**BASE, "total_steps": 2048})
    assert main(["sweep", changed, "--out", str(out), "--dry-run"]) == 2
    assert "another config" in capsys.readouterr().err
    assert (out / "manifest.json").read_text() == before


def test_damaged_result_and_status_files_count_as_not_finished(tmp_path):
    out = tmp_path / "out"
    spec = expand(BASE)
    claim_sweep_dir(out, spec, None)
    first, second = spec.runs
    (out / "runs" / first.name).mkdir()
    (out / "runs" / first.name / "result.json").write_text('{"total_steps": 10')  # killed mid-write
    (out / "status" / f"{second.name}.json").write_text("{")
    assert run_state(out, first) == "partial" and run_state(out, second) == "new"
    assert write_tables(out, spec) == (0, 0, 2)


def test_a_started_baseline_is_shown_as_starting_again_and_the_interrupt_says_so(tmp_path, capsys):
    out = tmp_path / "out"
    spec = expand({**BASE, "seeds": 1, "variants": {"ppo": {}, "sb3:ppo": {}}})
    claim_sweep_dir(out, spec, None)
    for run in spec.runs:
        (out / "runs" / run.name).mkdir()
    assert {run.kind: run_state(out, run) for run in spec.runs} == {"rlkit": "partial", "sb3:ppo": "restart"}
    assert main(["sweep", spec_file(tmp_path, {**BASE, "seeds": 1, "variants": {"ppo": {}, "sb3:ppo": {}}}),
                 "--out", str(out), "--dry-run"]) == 0
    assert "restart  sb3-ppo__CartPole-v1__s1" in capsys.readouterr().out
    from rlkit.ablation.sweep import SweepInterrupted
    from rlkit.cli import _interrupted

    for baselines in (False, True):
        assert _interrupted(SweepInterrupted("rlkit sweep x.toml", baselines=baselines), "sweep") == 130
        err = capsys.readouterr().err
        assert ("starts again" in err) == baselines and err.count("\n") == 1


def test_a_run_extended_by_hand_is_not_counted_as_the_sweeps_and_is_left_as_it_is(tmp_path):
    out = tmp_path / "out"
    spec = expand(BASE)
    claim_sweep_dir(out, spec, None)
    first, second = spec.runs
    for run, steps in ((first, 1024), (second, 1536)):  # the second resumed by hand, one rollout more
        (out / "runs" / run.name).mkdir()
        write_atomic(out / "runs" / run.name / "result.json", json.dumps({"total_steps": steps, "eval_history": [],
                                                                            "eval_return_mean": 20.0}))
    assert run_state(out, first) == "done" and run_state(out, second) == "extended"
    assert write_tables(out, spec) == (1, 1, 0)
    rows = (out / "runs.csv").read_text().splitlines()
    assert "past the spec's total_steps=1024" in next(r for r in rows if second.name in r)
    assert main(["sweep", spec_file(tmp_path), "--out", str(out), "--retry-failed"]) == 1  # nothing re-run
    assert read_json(out / "runs" / second.name / "result.json")["total_steps"] == 1536


def test_a_run_whose_newest_checkpoint_went_past_its_result_is_not_counted(tmp_path):
    """An extension by hand stopped after its last update: result.json is still the sweep's, the
    checkpoint (and so the policy) is not."""
    out = tmp_path / "out"
    spec = expand(BASE)
    claim_sweep_dir(out, spec, None)
    run = spec.runs[0]
    ckpt = out / "runs" / run.name / "checkpoints" / "update-0000016"
    ckpt.mkdir(parents=True)
    write_atomic(ckpt / "state.json", json.dumps({"env_steps": 8192}))
    write_atomic(ckpt.parent / "latest.json", json.dumps({"checkpoint": ckpt.name}))
    write_atomic(out / "runs" / run.name / "result.json",
                 json.dumps({"total_steps": 1024, "eval_history": [], "eval_return_mean": 9.0}))
    assert run_state(out, run) == "extended"
    ckpt.joinpath("state.json").write_text(json.dumps({"env_steps": 1024}))
    assert run_state(out, run) == "done"


@pytest.mark.parametrize("seeds", [10**20, 10**6, [1] * 2, [True], 0])
def test_absurd_seed_counts_are_one_line(tmp_path, capsys, seeds):
    assert main(["sweep", spec_file(tmp_path, {**BASE, "seeds": seeds}), "--out", str(tmp_path / "o"),
                 "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlkit: error:") and "seeds" in err and "\n" not in err


def test_a_variant_name_too_long_for_a_folder_is_refused_before_anything_is_written(tmp_path, capsys):
    spec = spec_file(tmp_path, {**BASE, "variants": {"x" * 300: {}}})
    for extra in (["--dry-run"], []):
        assert main(["sweep", spec, "--out", str(tmp_path / "o"), *extra]) == 2
        assert "bytes; at most 200" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_damaged_manifest_is_one_line_and_left_as_it_is(tmp_path, capsys):
    out = tmp_path / "out"
    claim_sweep_dir(out, expand(BASE), None)
    (out / "manifest.json").write_text('{"spec": {"name"')
    for argv in (["sweep", spec_file(tmp_path), "--out", str(out), "--dry-run"], ["report", str(out)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "manifest.json is damaged" in err and "\n" not in err
    assert (out / "manifest.json").read_text() == '{"spec": {"name"'


def test_atomic_writes_leave_the_old_file_when_the_rename_fails(tmp_path, monkeypatch):
    path = tmp_path / "result.json"
    write_atomic(path, '{"a": 1}')
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(OSError):
        write_atomic(path, '{"a": 2}')
    assert read_json(path) == {"a": 1} and [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_a_second_sweep_into_a_directory_in_use_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    with sweep_lock(out):
        assert main(["sweep", spec_file(tmp_path), "--out", str(out)]) == 2
        assert "in use by another rlkit sweep (pid" in capsys.readouterr().err
    assert not (out / "manifest.json").exists()


# ------------------------------------------------------------------ signals
SLOW = {**BASE, "seeds": 4, "total_steps": 40_960, "num_envs": 2, "num_steps": 128, "checkpoint_every": 256,
        "eval_every": 0, "eval_episodes": 2}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("pack, workers", [("1", "2"), ("2", "1")])  # runs alone; packs of two seeds
def test_sigint_to_the_sweep_pid_starts_no_further_run_and_leaves_no_process(tmp_path, pack, workers):
    spec, out = spec_file(tmp_path, SLOW, name="my spec.toml"), tmp_path / "out dir"  # the command pastes as is
    cmd = [sys.executable, "-c", "import sys; from rlkit.cli import main; sys.exit(main(sys.argv[1:]))",
           "sweep", spec, "--out", str(out), "--workers", workers, "--pack", pack]
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not list(out.glob("runs/*/checkpoints/update-*")) and time.time() < deadline:
        time.sleep(0.02)
    workers = children(proc.pid)
    proc.send_signal(signal.SIGINT)  # the sweep's own pid only, as `kill -INT` or a notebook does
    try:
        err = proc.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the sweep did not stop after SIGINT to its pid")
    assert proc.returncode == 130 and "continue with: rlkit sweep" in err
    import shlex

    again = shlex.split(err.strip().splitlines()[-1].split("continue with: ", 1)[1])  # pastes as it reads
    assert again[:3] == ["rlkit", "sweep", spec] and again[again.index("--out") + 1] == str(out)
    assert len(list(out.glob("runs/*/result.json"))) < 4 and len(list(out.glob("runs/*"))) <= 2  # none queued ran
    assert workers and wait_gone(workers) == []
    stopped = [json.loads((d / "checkpoints" / "latest.json").read_text()) for d in out.glob("runs/*")
               if (d / "checkpoints" / "latest.json").exists()]
    assert stopped  # the runs in flight checkpointed on their way out


# ------------------------------------------------------------------ reports
def fake_sweep(tmp_path, finals, reference=True, envs=("CartPole-v1",)):
    """A sweep directory with hand-written results: ``finals[(variant, env, seed)] = [returns...]``."""
    variants = sorted({v for v, _, _ in finals})
    spec_data = {**BASE, "envs": list(envs), "seeds": sorted({s for _, _, s in finals}),
                 "variants": {v: {} for v in variants}}
    if reference:
        spec_data["reference"] = {e: {"random": 0.0, "reference": 500.0} for e in envs}
    out = tmp_path / "out"
    spec = expand(spec_data)
    claim_sweep_dir(out, spec, None)
    for run in spec.runs:
        returns = finals.get((run.variant, run.env, run.seed))
        if returns is None:
            continue
        (out / "runs" / run.name).mkdir()
        history = [[512 * (i + 1), r, 1.0] for i, r in enumerate(returns)]
        (out / "runs" / run.name / "result.json").write_text(json.dumps(
            {"total_steps": 1024, "steps_per_second": 1000.0, "eval_history": history,
             "eval_seconds": [0.1 * (i + 1) for i in range(len(returns))], "eval_return_mean": returns[-1] if returns else None}))
    return out


def strict_json(path):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(Path(path).read_text(), parse_constant=refuse)


def test_a_nan_or_inf_final_score_is_left_out_and_named_not_replaced(tmp_path):
    finals = {("a", "CartPole-v1", s): [100.0, 200.0 + s] for s in (1, 2, 3)}
    finals.update({("b", "CartPole-v1", 1): [300.0, math.nan], ("b", "CartPole-v1", 2): [300.0, math.inf],
                   ("b", "CartPole-v1", 3): [100.0, 250.0]})
    out = fake_sweep(tmp_path, finals)
    report = write_report(str(out), reps=100)
    summary = strict_json(report["summary"])
    b = next(r for r in summary["per_env"] if r["variant"] == "b")
    assert b["runs"] == 1 and b["mean"] == 250.0  # not 300 (an earlier evaluation standing in)
    assert {(r["variant"], r["seed"]) for r in summary["non_finite"]} == {("b", 1), ("b", 2)}
    assert "b / CartPole-v1 / seed 1" in Path(report["report"]).read_text()


def test_variants_that_finished_disjoint_envs_still_get_a_report(tmp_path):
    envs = ("CartPole-v1", "Acrobot-v1")
    finals = {("a", "CartPole-v1", 1): [100.0], ("b", "Acrobot-v1", 1): [-100.0]}
    out = fake_sweep(tmp_path, finals, envs=envs)
    summary = strict_json(write_report(str(out), reps=100)["summary"])
    assert "aggregate" not in summary and "every variant" in summary["aggregate_skipped"]


def test_an_env_no_run_beats_random_on_is_not_normalized_with_a_made_up_scale(tmp_path):
    finals = {(v, "CartPole-v1", s): [1.0] for v in ("a", "b") for s in (1, 2)}  # below a random policy (~22)
    out = fake_sweep(tmp_path, finals, reference=False)
    summary = strict_json(write_report(str(out), reps=100)["summary"])
    ref = summary["references"]["CartPole-v1"]
    assert not ref["usable"] and "not normalized" in ref["source"] and ref["reference"] == 1.0
    assert "aggregate" not in summary


@pytest.mark.parametrize("reps", ["0", "-5", "1", "2", "99", "1000001", "10000000000"])
def test_report_reps_out_of_range_are_one_line(tmp_path, capsys, reps):
    out = fake_sweep(tmp_path, {("a", "CartPole-v1", 1): [100.0]})
    assert main(["report", str(out), "--reps", reps]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--reps must be 100 to 1,000,000" in err and not (out / "report").exists()


def test_a_sweep_without_evaluations_says_so(tmp_path, capsys):
    out = fake_sweep(tmp_path, {("a", "CartPole-v1", 1): []})
    assert main(["report", str(out)]) == 2
    assert "none recorded an evaluation" in capsys.readouterr().err


def test_colours_stay_distinct_past_twenty_variants():
    names = [f"v{i}" for i in range(37)]
    looks = figures.looks(names, "v0", ["v5", "v30"]).values()
    assert len({look.colour for look in looks}) == 37




def test_the_python_api_refuses_impossible_arguments():
    import torch

    from rlkit.core.gae import compute_gae
    from rlkit.gym.agent import run_episodes

    with pytest.raises(ValueError, match="episodes"):
        run_episodes(lambda obs: 0, "CartPole-v1", -3)
    with pytest.raises(ValueError, match="max_steps"):
        run_episodes(lambda obs: 0, "CartPole-v1", 2, max_steps=0)
    zeros, flags = torch.zeros(2, 1), torch.zeros(2, 1, dtype=torch.bool)
    with pytest.raises(ValueError, match="gamma"):
        compute_gae(zeros, zeros, zeros, flags, flags, gamma=2.0, lam=0.95)
    with pytest.raises(ValueError, match="lam"):
        compute_gae(zeros, zeros, zeros, flags, flags, gamma=0.99, lam=-0.1)
    assert compute_gae(zeros, zeros, zeros, flags, flags, gamma=1.0, lam=0.0).advantages.shape == (2, 1)


def test_eval_of_a_sweep_directory_names_its_runs_not_damaged_checkpoints(tmp_path, capsys):
    out = tmp_path / "out"
    claim_sweep_dir(out, expand(BASE), None)
    assert main(["eval", str(out)]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith("rlkit: error:") and "sweep directory" in line and "unreadable" not in line
    for path, words in ((tmp_path / "spec.toml", "is a file"), ("", "empty")):
        Path(tmp_path / "spec.toml").write_text("x")
        assert main(["eval", str(path)]) == 2
        assert words in capsys.readouterr().err
