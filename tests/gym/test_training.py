"""End-to-end training checks: learning on toy envs, determinism, resume, checkpoints."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file

import rlkit
from rlkit.gym.trainer import resume
from rlkit.io.checkpoint import resolve_checkpoint
from tests.robustness.helpers import logged_steps


def small(logdir, **kw):
    base = dict(env="CartPole-v1", total_steps=4 * 512, num_envs=4, num_steps=128, num_minibatches=4,
                update_epochs=2, logdir=logdir, eval_episodes=2, progress=False)
    return rlkit.TrainConfig(**{**base, **kw})


def test_identity_discrete_is_learned(logdir):
    cfg = small(logdir, env="rlkit-test/IdentityDiscrete-v0", total_steps=12_288, num_envs=4, num_steps=64,
                learning_rate=3e-3, ent_coef=0.0, gamma=0.0, eval_episodes=5)
    result = rlkit.train(cfg)
    assert result.eval_return_mean >= 15.0  # 16 steps, 1 per correct choice; random gets ~4


def test_identity_box_is_learned(logdir):
    cfg = small(logdir, env="rlkit-test/IdentityBox-v0", total_steps=30_720, num_envs=8, num_steps=64,
                learning_rate=3e-3, ent_coef=0.0, gamma=0.0, update_epochs=4, eval_episodes=5)
    result = rlkit.train(cfg)
    assert result.eval_return_mean > -1.0  # a zero action scores ~ -10.7 over 16 steps


def test_same_seed_is_bit_identical_and_other_seed_differs(logdir):
    a = rlkit.train(small(logdir, run_name="a"))
    b = rlkit.train(small(logdir, run_name="b"))
    c = rlkit.train(small(logdir, run_name="c", seed=2))
    wa, wb, wc = (load_file(str(resolve_checkpoint(r.run_dir) / "tensors.safetensors")) for r in (a, b, c))
    assert all((wa[k] == wb[k]).all() for k in wa)
    assert any((wa[k] != wc[k]).any() for k in wa if k.startswith("model."))
    assert a.eval_return_mean == b.eval_return_mean


def test_periodic_evaluation_is_logged_and_leaves_training_unchanged(logdir):
    plain = rlkit.train(small(logdir, run_name="plain", total_steps=6 * 512))
    evald = rlkit.train(small(logdir, run_name="evald", total_steps=6 * 512, eval_every=1024))
    assert [step for step, _, _ in evald.eval_history] == [1024, 2048, 3072]  # every 1024 steps, then the final one
    assert [step for step, _, _ in plain.eval_history] == [3072]
    assert evald.eval_history[-1][1] == evald.eval_return_mean
    wa, wb = (load_file(str(resolve_checkpoint(r.run_dir) / "tensors.safetensors")) for r in (plain, evald))
    assert all((wa[k] == wb[k]).all() for k in wa if k.startswith("model."))
    assert plain.eval_return_mean == evald.eval_return_mean


def test_extending_a_finished_run_keeps_every_evaluation_it_made(logdir):
    """The finished run's final evaluation (after its last checkpoint) stays in the extended history."""
    kw = dict(num_envs=2, num_steps=64, num_minibatches=2, update_epochs=1, eval_every=256, eval_episodes=1)
    whole = rlkit.train(small(logdir, run_name="whole", total_steps=768, **kw))
    first = rlkit.train(small(logdir, run_name="ext", total_steps=512, **kw))
    assert [step for step, _, _ in first.eval_history] == [256, 512]
    extended = resume(first.run_dir, total_steps=768)
    assert [tuple(e) for e in extended.eval_history] == [tuple(e) for e in whole.eval_history]
    assert [step for step, _, _ in extended.eval_history] == [256, 512, 768]
    assert extended.eval_seconds[:2] == first.eval_seconds and len(extended.eval_seconds) == 3
    saved = json.loads((Path(first.run_dir) / "result.json").read_text())
    assert [e[0] for e in saved["eval_history"]] == [256, 512, 768] and len(saved["eval_seconds"]) == 3
    again = resume(first.run_dir, total_steps=1024)  # extended twice: still every evaluation
    assert [step for step, _, _ in again.eval_history] == [256, 512, 768, 1024]


def test_returned_agent_acts_with_the_trained_weights_without_final_evaluation(logdir):
    evaluated = rlkit.train(small(logdir, run_name="with", eval_episodes=3))
    silent = rlkit.train(small(logdir, run_name="without", eval_episodes=0))
    assert math.isnan(silent.eval_return_mean)
    assert silent.agent.evaluate("CartPole-v1", 3, seed=1 + 10_000).mean == evaluated.eval_return_mean


def test_checkpoint_round_trip_keeps_normalization(logdir, capsys):
    cfg = small(logdir, env="Pendulum-v1", norm_obs=True, norm_reward=True, num_envs=2, num_steps=256,
                total_steps=2048, run_name="pend")
    result = rlkit.train(cfg)
    agent, loaded_cfg = rlkit.Agent.load(result.run_dir)
    assert loaded_cfg == cfg
    np.testing.assert_array_equal(agent.obs_norm.rms.mean, result.agent.obs_norm.rms.mean)
    assert agent.obs_norm.rms.count > 1000
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    np.testing.assert_array_equal(agent.act(obs), result.act(obs))
    from rlkit.cli import main
    assert main(["eval", result.run_dir, "--episodes", "2"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(line) == {"env", "run_dir", "variant", "eval_seed", "episodes", "eval_steps", "eval_steps_per_second",
                         "eval_return_mean", "eval_return_std", "capped_episodes"}
    assert (line["eval_seed"], line["episodes"]) == (10_000, 2)  # the evaluation's, not the run's seed (3)
    assert line["eval_steps"] == 2 * 200  # two episodes to Pendulum's time limit, not the run's 2048 steps


def test_cli_train_prints_one_json_line(logdir, capsys):
    from rlkit.cli import main
    code = main(["train", "--preset", "cartpole", "--total-steps", "1024", "--logdir", logdir,
                 "--run-name", "cli", "--eval-episodes", "1", "--no-anneal-lr"])
    assert code == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["env"] == "CartPole-v1" and out["total_steps"] == 1024 and out["run_dir"].endswith("cli")
    saved = json.loads((Path(logdir) / "cli" / "config.json").read_text())
    assert saved["anneal_lr"] is False and saved["num_envs"] == 4


def test_async_envs_run_and_match_sync(logdir):
    a = rlkit.train(small(logdir, run_name="sync", total_steps=1024, eval_episodes=1))
    b = rlkit.train(small(logdir, run_name="async", total_steps=1024, eval_episodes=1, async_envs=True))
    wa, wb = (load_file(str(resolve_checkpoint(r.run_dir) / "tensors.safetensors")) for r in (a, b))
    assert all((wa[k] == wb[k]).all() for k in wa)


# The killed run's process: once update 8 is logged (after the checkpoint of update 5, before that
# of update 10) it says so in a file and stops there, to be killed with its events past the checkpoint.
STOPS_AFTER_UPDATE_8 = """
import sys, time
from pathlib import Path
import rlkit, tests.toy_envs
from rlkit.io.logger import Logger
from tests.gym.test_training import small
logged = Logger.scalars
def scalars(self, values, step):
    logged(self, values, step)
    if step == 8 * 512:
        Path(sys.argv[1]).write_text("update 8 logged")
        time.sleep(3600)
Logger.scalars = scalars
rlkit.train(small(sys.argv[2], run_name="r", **eval(sys.argv[3])))
"""


def test_kill_9_and_resume_equals_uninterrupted_run(tmp_path):
    args = dict(total_steps=12 * 512, checkpoint_every=5 * 512, update_epochs=2, eval_episodes=1)
    ref = rlkit.train(small(str(tmp_path / "ref"), run_name="r", **args))
    logdir, marker = str(tmp_path / "killed"), tmp_path / "stopped"
    proc = subprocess.Popen([sys.executable, "-c", STOPS_AFTER_UPDATE_8, str(marker), logdir, repr(args)],
                            cwd=Path(__file__).parents[2])
    try:
        deadline = time.time() + 120  # a bound on a hang only
        while not marker.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.01)
        assert marker.exists(), "the run never logged its update 8"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    ckpts = Path(logdir) / "r" / "checkpoints"
    assert json.loads((ckpts / "latest.json").read_text())["checkpoint"] == "update-0000005"
    assert logged_steps(Path(logdir) / "r", "charts/learning_rate")[-1] == 8 * 512  # logged past the checkpoint
    resumed = rlkit.train(rlkit.TrainConfig(resume=str(Path(logdir) / "r")))
    wa = load_file(str(resolve_checkpoint(ref.run_dir) / "tensors.safetensors"))
    wb = load_file(str(resolve_checkpoint(resumed.run_dir) / "tensors.safetensors"))
    assert all((wa[k] == wb[k]).all() for k in wa)
    assert resumed.eval_return_mean == ref.eval_return_mean
    # TensorBoard: one point per update, none duplicated or lost across the kill.
    expected = [512 * (i + 1) for i in range(12)]
    assert logged_steps(Path(logdir) / "r", "charts/learning_rate") == expected
    assert logged_steps(Path(ref.run_dir), "charts/learning_rate") == expected


@pytest.mark.slow
def test_cartpole_reaches_475_within_100k_steps(logdir):
    cfg = rlkit.preset("cartpole", total_steps=100_000, logdir=logdir, eval_episodes=20, progress=False)
    result = rlkit.train(cfg)
    assert result.eval_return_mean >= 475, result.eval_return_mean
