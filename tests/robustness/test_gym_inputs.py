"""Bad input to the Gymnasium side is one line (exit 2) and nothing is written; resumes can extend
a run but never silently ignore a flag; damaged checkpoints fall back or fail in one line."""

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import rlkit
from rlkit.errors import CheckpointError, ConfigError
from tests.robustness.helpers import SMALL, error_line, last_json, run_cli


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A small run with two checkpoints (update 4 and the final update 8)."""
    logdir = tmp_path_factory.mktemp("runs")
    out = last_json(run_cli("train", *SMALL, "--total-steps", "1024", "--num-steps", "64", "--checkpoint-every",
                            "512", "--logdir", str(logdir), "--run-name", "r"))
    return Path(out["run_dir"])


def copy_run(run, tmp_path):
    dest = tmp_path / "copy"
    shutil.copytree(run, dest)
    return dest


# ------------------------------------------------------------------------------ resume
def test_resume_refuses_flags_it_would_ignore_and_names_them(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path)
    line = error_line(run_cli("train", "--resume", str(run), "--learning-rate", "0.1", "--env", "Acrobot-v1"))
    assert "learning_rate" in line and "env" in line and "total_steps" in line  # the refused, and what may change
    assert "--preset" in error_line(run_cli("train", "--resume", str(run), "--preset", "cartpole"))
    assert "cannot change seed" in error_line(run_cli("train", "--resume", str(run), "--seed", "5"))


def test_resume_accepts_flags_that_repeat_the_runs_own_values(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path)
    own = json.loads((run / "config.json").read_text())
    out = last_json(run_cli("train", "--resume", str(run), "--seed", str(own["seed"]), "--num-envs",
                            str(own["num_envs"]), "--total-steps", "1536"))
    assert out["total_steps"] == 1536 and out["seed"] == own["seed"]


def test_resume_extends_a_finished_run(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path)
    out = last_json(run_cli("train", "--resume", str(run), "--total-steps", "1536"))
    assert out["total_steps"] == 1536 and out["updates"] == 12
    assert json.loads((run / "checkpoints" / "latest.json").read_text())["checkpoint"] == "update-0000012"
    assert "below" in error_line(run_cli("train", "--resume", str(run), "--total-steps", "512"))


def test_resuming_a_finished_run_does_not_log_a_second_evaluation(finished_run, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = copy_run(finished_run, tmp_path)
    first = last_json(run_cli("train", "--resume", str(run)))
    assert first["total_steps"] == 1024
    acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
    acc.Reload()
    assert [e.step for e in acc.Scalars("eval/return_mean")] == [1024]


def test_an_extension_stopped_after_its_last_update_still_gets_its_final_evaluation(finished_run, tmp_path):
    """Killed between its last checkpoint and its final evaluation, an extension's result.json is the
    earlier run's: resuming evaluates the extended policy instead of reporting the old return."""
    run = copy_run(finished_run, tmp_path)
    before = (run / "result.json").read_text()
    assert last_json(run_cli("train", "--resume", str(run), "--total-steps", "1536"))["total_steps"] == 1536
    (run / "result.json").write_text(before)  # as if killed before the final evaluation was written
    out = last_json(run_cli("train", "--resume", str(run)))
    assert out["total_steps"] == 1536 and out["eval_history"][-1][0] == 1536


def test_resume_of_an_rlhf_run_says_so(tmp_path):
    state = {"config": {}, "iteration": 2}
    ckpt = tmp_path / "r" / "checkpoints" / "iteration-000002"
    ckpt.mkdir(parents=True)
    (ckpt / "state.json").write_text(json.dumps(state))
    save_file({"flat": torch.zeros(2)}, str(ckpt / "tensors.safetensors"))
    assert "rlkit rlhf --resume" in error_line(run_cli("train", "--resume", str(tmp_path / "r")))


# --------------------------------------------------------------------------- checkpoints
def test_a_truncated_newest_checkpoint_falls_back_to_the_previous_one(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path)
    newest = run / "checkpoints" / "update-0000008" / "tensors.safetensors"
    newest.write_bytes(newest.read_bytes()[:100])
    proc = run_cli("eval", str(run), "--episodes", "1")
    assert proc.returncode == 0 and "using the older checkpoint update-0000004" in proc.stderr
    out = last_json(run_cli("train", "--resume", str(run)))
    assert out["updates"] == 8  # re-ran updates 5-8 from the intact checkpoint


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage_state", "missing_keys", "wrong_shape", "huge_count",
                                    "config_null", "config_string", "nan_weights", "int_weights"])
def test_a_damaged_only_checkpoint_is_one_line_for_resume_and_eval(finished_run, tmp_path, damage):
    run = copy_run(finished_run, tmp_path)
    shutil.rmtree(run / "checkpoints" / "update-0000004")
    ckpt = run / "checkpoints" / "update-0000008"
    tensors_file, state_file = ckpt / "tensors.safetensors", ckpt / "state.json"
    if damage == "empty":
        tensors_file.write_bytes(b"")
    elif damage == "truncated":
        tensors_file.write_bytes(tensors_file.read_bytes()[:-50])
    elif damage == "garbage_state":
        state_file.write_text("{not json")
    elif damage in ("missing_keys", "huge_count", "config_null", "config_string"):
        state = json.loads(state_file.read_text())
        if damage == "missing_keys":
            del state["obs_norm"], state["rng_numpy"]
        elif damage == "huge_count":
            state["obs_norm"]["rms"]["count"] = 10 ** 401
        else:
            state["config"] = None if damage == "config_null" else "abc"
        state_file.write_text(json.dumps(state))
    elif damage in ("nan_weights", "int_weights"):
        tensors = load_file(str(tensors_file))
        weight = tensors["model.actor.0.weight"]
        tensors["model.actor.0.weight"] = weight.fill_(float("nan")) if damage == "nan_weights" else weight.int()
        save_file(tensors, str(tensors_file))
    else:
        tensors = load_file(str(tensors_file))
        tensors["model.actor.0.weight"] = torch.zeros(3, 3)
        save_file(tensors, str(tensors_file))
    before = sorted(p.name for p in run.rglob("*"))
    for args in (["train", "--resume", str(run)], ["eval", str(run), "--episodes", "1"]):
        line = error_line(run_cli(*args))
        assert "checkpoint" in line
    assert sorted(p.name for p in run.rglob("*")) == before  # nothing written


def test_a_garbled_latest_pointer_is_not_needed(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path)
    (run / "checkpoints" / "latest.json").write_text("garbage")
    assert last_json(run_cli("eval", str(run), "--episodes", "1"))["eval_steps"] > 0


def test_a_full_disk_during_a_checkpoint_keeps_the_previous_one(tmp_path, monkeypatch):
    import rlkit.io.checkpoint as ckpt_mod

    real, calls = ckpt_mod.save_file, []

    def fill_disk(tensors, path):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(tensors, path)

    monkeypatch.setattr(ckpt_mod, "save_file", fill_disk)
    cfg = rlkit.TrainConfig(total_steps=1024, num_envs=2, num_steps=64, num_minibatches=2, update_epochs=1,
                            checkpoint_every=512, logdir=str(tmp_path), run_name="r", eval_episodes=0, progress=False)
    with pytest.raises(CheckpointError, match="No space left on device.*previous checkpoint") as e:
        rlkit.train(cfg)
    assert "\n" not in str(e.value)
    root = tmp_path / "r" / "checkpoints"
    assert json.loads((root / "latest.json").read_text())["checkpoint"] == "update-0000004"
    assert [p.name for p in root.iterdir() if p.name.startswith(".")] == []  # no half-written checkpoint left
    monkeypatch.setattr(ckpt_mod, "save_file", real)
    assert rlkit.train(rlkit.TrainConfig(resume=str(tmp_path / "r"))).updates == 8


def test_a_run_whose_first_checkpoint_failed_restarts_on_resume(tmp_path, monkeypatch):
    import rlkit.io.checkpoint as ckpt_mod

    def full(tensors, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt_mod, "save_file", full)
    cfg = rlkit.TrainConfig(total_steps=1024, num_envs=2, num_steps=64, num_minibatches=2, update_epochs=1,
                            checkpoint_every=512, logdir=str(tmp_path), run_name="r", eval_episodes=0, progress=False)
    with pytest.raises(CheckpointError):
        rlkit.train(cfg)
    monkeypatch.undo()
    assert rlkit.train(rlkit.TrainConfig(resume=str(tmp_path / "r"))).updates == 8


# ------------------------------------------------------------------------ output places
@pytest.mark.parametrize("where", ["a_file", "proc"])
def test_bad_output_locations_are_one_line(tmp_path, where):
    logdir = tmp_path / "file" if where == "a_file" else Path("/proc/rlkit-test")
    if where == "a_file":
        logdir.write_text("x")
    assert "logdir" in error_line(run_cli("train", *SMALL, "--logdir", str(logdir)))


# ------------------------------------------------------------------------------- values
@pytest.mark.parametrize("args,word", [
    (["--seed", "-1"], "seed"), (["--seed", str(2**70)], "seed"), (["--device", "cuda"], "device"),
    (["--device", "foo"], "device"), (["--outer-optimizer", "LBFGS"], "outer_optimizer"),
    (["--outer-optimizer", "SparseAdam"], "outer_optimizer"), (["--outer-optimizer", "Optimizer"], "outer_optimizer"),
    (["--env", "rlkit-test/ImageObs-v0"], "does not fit"), (["--preset", "mujoco", "cartpole"], "env preset"),
    (["--preset", "cartpole", "--preset", "mujoco"], "env preset"), (["--env", "no_such_module:X-v0"], "import"),
])
def test_bad_values_are_one_line(tmp_path, args, word):
    if args[1] == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    line = error_line(run_cli("train", *SMALL, "--logdir", str(tmp_path / "runs"), *args))
    assert word in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("events.*"))


def test_eval_seed_out_of_range_is_one_line(finished_run):
    assert "seed" in error_line(run_cli("eval", str(finished_run), "--seed", "-1"))


def test_python_api_values(tmp_path):
    with pytest.raises(ConfigError, match="learning_rate"):
        rlkit.TrainConfig(learning_rate="0.1")
    t, n = 5, 2
    rng = np.random.default_rng(0)
    args = [rng.normal(size=(t, n)).astype(np.float32) for _ in range(3)] + [np.zeros((t, n), bool)] * 2
    from_numpy = rlkit.compute_gae(*args, gamma=0.9, lam=0.8)
    from_torch = rlkit.compute_gae(*(torch.from_numpy(a) for a in args), gamma=0.9, lam=0.8)
    assert torch.equal(from_numpy.advantages, from_torch.advantages)


def test_agent_act_refuses_what_it_cannot_act_on(finished_run):
    from rlkit.errors import ObservationError

    agent = rlkit.load_agent(finished_run)
    assert agent.act(np.zeros(4, np.float32)) in (0, 1)
    for bad, word in ((np.zeros(3), "shape"), (np.array([0, np.nan, 0, 0]), "NaN"), (None, "None"), ("text", "numeric")):
        with pytest.raises(ObservationError, match=word):
            agent.act(bad)


def test_none_observation_is_named(tmp_path):
    line = error_line(run_cli("train", *SMALL, "--env", "rlkit-test/NoneObs-v0", "--logdir", str(tmp_path)))
    assert "NoneObs" in line and "non-finite" not in line


def test_module_env_id_form_trains_and_evaluates(tmp_path, monkeypatch):
    module = tmp_path / "rlkit_custom_env_pkg.py"
    module.write_text("import gymnasium as gym\n"
                      "gym.register('CustomCartPole-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv',"
                      " max_episode_steps=50)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = rlkit.train(rlkit.TrainConfig(env="rlkit_custom_env_pkg:CustomCartPole-v0", total_steps=512,
                                           num_envs=2, num_steps=64, num_minibatches=2, logdir=str(tmp_path / "r"),
                                           eval_episodes=1, progress=False))
    assert 0 < result.eval_return_mean <= 50
    sys.modules.pop("rlkit_custom_env_pkg", None)


def test_small_visible_things(tmp_path):
    help_proc = run_cli("--help")
    assert help_proc.returncode == 0 and "rlkit train" in help_proc.stdout
    out = last_json(run_cli("train", *SMALL, "--eval-episodes", "0", "--logdir", str(tmp_path)))
    assert out["eval_return_mean"] is None and out["eval_return_std"] is None  # null, not NaN


@pytest.mark.parametrize("args", [["--no-hp3o", "--hp3o-plus"], ["--preset", "cartpole", "hp3o-plus", "--no-hp3o"],
                                  ["--no-outer", "--outer-lr", "1.5"]])
def test_a_variant_switched_off_while_its_options_turn_it_on_is_refused(tmp_path, args):
    line = error_line(run_cli("train", *args, "--logdir", str(tmp_path)))
    assert "is refused" in line and "turn(s)" in line
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("async_envs", [[], ["--async-envs"]], ids=["in-process", "async"])
def test_an_env_whose_reset_raises_is_one_line(tmp_path, async_envs):
    line = error_line(run_cli("train", *SMALL, "--env", "rlkit-test/ResetRaises-v0", *async_envs, "--logdir",
                              str(tmp_path)))
    assert "simulated reset failure" in line


def test_each_run_in_one_process_warns_of_a_failing_close_once(tmp_path, caplog):
    import rlkit

    cfg = rlkit.TrainConfig(env="rlkit-test/CloseRaises-v0", total_steps=256, num_envs=2, num_steps=64,
                            num_minibatches=2, update_epochs=1, eval_episodes=1, logdir=str(tmp_path), progress=False)
    for name in ("a", "b"):
        caplog.clear()
        rlkit.train(cfg.replace(run_name=name))
        assert sum("failed while closing" in r.getMessage() for r in caplog.records) == 1


def test_an_env_that_fails_in_an_async_worker_is_one_line_naming_the_cause(tmp_path):
    line = error_line(run_cli("train", *SMALL, "--env", "rlkit-test/WorkerFails-v0", "--async-envs", "--logdir",
                              str(tmp_path)))
    assert "cannot open the simulator in this worker" in line


def _fails() -> None:
    raise RuntimeError("cannot open the simulator in this worker")


def test_a_worker_whose_env_fails_keeps_its_pipe_open_until_the_trainer_has_spoken():
    """However late the trainer sends its first command (a slow parent, a fast worker), the send
    finds the worker's pipe open and the trainer then reads the worker's error, not a broken pipe."""
    import multiprocessing
    import time

    from rlkit.gym.envs import _signal_free_worker

    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    errors = ctx.Queue()
    worker = ctx.Process(target=_signal_free_worker, args=(0, _fails, child, parent, None, errors, None, None))
    worker.start()
    child.close()
    assert parent.recv() == (None, False)
    time.sleep(1.0)  # the worker has long had time to exit
    parent.send(("_check_spaces", None))  # a BrokenPipeError here is what the trainer would report
    worker.join(10)
    assert worker.exitcode == 1 and "cannot open the simulator" in str(errors.get(timeout=5)[2])


@pytest.mark.parametrize("trainer_goes", ["closes its end", "terminates the worker"])
def test_a_worker_whose_env_failed_does_not_outlive_a_trainer_that_never_speaks(trainer_goes, monkeypatch):
    """A trainer that died (its end closed) or exits (multiprocessing terminates its daemonic
    workers with SIGTERM) without a first command leaves no waiting worker behind. The worker's
    longest wait for a first command is made an hour here: it must exit on the event itself (a
    wait would hang; bounded by a minute)."""
    import multiprocessing

    from rlkit.gym import envs
    from rlkit.gym.envs import _signal_free_worker

    monkeypatch.setattr(envs, "FAILED_WORKER_WAIT", 3600.0)  # the forked worker reads this
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    worker = ctx.Process(target=_signal_free_worker, args=(0, _fails, child, parent, None, ctx.Queue(), None, None))
    worker.start()
    child.close()
    try:
        assert parent.recv() == (None, False)
        if trainer_goes == "closes its end":
            parent.close()
        else:
            worker.terminate()
        worker.join(60)
        assert worker.exitcode is not None, "the worker waited for a command that could not come"
    finally:
        worker.kill()


@pytest.mark.parametrize("env", ["rlkit-test/CloseRaises-v0", "rlkit-test/CloseInterrupts-v0"])
@pytest.mark.parametrize("async_envs", [[], ["--async-envs"]], ids=["in-process", "async"])
def test_an_env_whose_close_raises_costs_no_result_and_eval_still_works(tmp_path, async_envs, env):
    """A failure to close is one warning: the finished run keeps its evaluation and result (with
    async envs too, where Gymnasium closes a first env while it reads the spaces). A
    KeyboardInterrupt that close() raises itself is such a failure, not the user's Ctrl-C."""
    proc = run_cli("train", *SMALL, "--env", env, "--eval-every", "512", *async_envs,
                   "--logdir", str(tmp_path), "--run-name", "c")
    out = last_json(proc)
    assert out["eval_return_mean"] is not None and (tmp_path / "c" / "result.json").is_file()
    assert "Traceback" not in proc.stderr and proc.stderr.count("failed while closing") == 1, proc.stderr[-2000:]
    evaluated = run_cli("eval", str(tmp_path / "c"), "--episodes", "2")
    assert evaluated.returncode == 0 and "Traceback" not in evaluated.stderr, evaluated.stderr[-2000:]


def test_an_async_worker_error_is_one_line_without_the_worker_traceback(tmp_path):
    proc = run_cli("train", *SMALL, "--env", "rlkit-test/Raising-v0", "--async-envs", "--logdir", str(tmp_path))
    line = error_line(proc)
    assert "simulated physics blow-up" in line
    assert proc.stderr.strip().count("\n") == 0, proc.stderr  # Gymnasium's "Received the following error" held back
