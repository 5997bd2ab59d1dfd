"""Bad input is a clear one-line error, and nothing already written is lost."""

import subprocess
import sys
from pathlib import Path

import pytest

import rlkit
from rlkit.cli import main


def cfg(logdir, **kw):
    base = dict(total_steps=1024, num_envs=2, num_steps=64, num_minibatches=2, update_epochs=1, logdir=logdir,
                eval_episodes=1, progress=False)
    return rlkit.TrainConfig(**{**base, **kw})


def one_line(exc_info):
    text = str(exc_info.value)
    assert "\n" not in text
    return text


def test_unknown_env_id(logdir):
    with pytest.raises(rlkit.EnvError) as e:
        rlkit.train(cfg(logdir, env="NoSuchEnv-v9"))
    assert "NoSuchEnv-v9" in one_line(e)


@pytest.mark.parametrize("field,value", [("num_envs", 0), ("num_steps", -1), ("total_steps", 0),
                                         ("num_minibatches", 0), ("update_epochs", 0)])
def test_non_positive_sizes(logdir, field, value):
    with pytest.raises(rlkit.ConfigError) as e:
        cfg(logdir, **{field: value})
    assert field in one_line(e)


def test_minibatches_must_divide_the_batch(logdir):
    with pytest.raises(rlkit.ConfigError) as e:
        cfg(logdir, num_minibatches=3)
    assert "does not divide" in one_line(e)


@pytest.mark.parametrize("field,value", [("learning_rate", float("nan")), ("gamma", 1.5), ("target_kl", -1.0)])
def test_malformed_numbers(logdir, field, value):
    with pytest.raises(rlkit.ConfigError):
        cfg(logdir, **{field: value})


def test_unsupported_action_space_names_the_space(logdir):
    with pytest.raises(rlkit.UnsupportedSpaceError) as e:
        rlkit.train(cfg(logdir, env="rlkit-test/DictActions-v0"))
    assert "Dict" in one_line(e)


@pytest.mark.parametrize("env,what", [("rlkit-test/NaNObs-v0", "observations"), ("rlkit-test/NaNReward-v0", "rewards")])
def test_nan_from_env_reports_the_update(logdir, env, what):
    with pytest.raises(rlkit.NonFiniteError) as e:
        rlkit.train(cfg(logdir, env=env))
    msg = one_line(e)
    assert what in msg and "update 1" in msg  # 2 envs x 40 steps each: fails inside the first rollout


def test_nan_loss_reports_the_update(logdir, monkeypatch):
    import rlkit.fast.kernels as kernels

    def poison(real):
        def poisoned(*args, **kwargs):
            out = real(*args, **kwargs)
            return out._replace(loss=out.loss * float("nan"))
        return poisoned

    monkeypatch.setattr(kernels, "ppo_loss", poison(kernels.ppo_loss))
    monkeypatch.setattr(kernels, "fused_ppo_loss", poison(kernels.fused_ppo_loss))
    with pytest.raises(rlkit.NonFiniteError) as e:
        rlkit.train(cfg(logdir, env="CartPole-v1"))
    assert "loss" in one_line(e) and "update 1" in one_line(e)


@pytest.mark.parametrize("async_envs", [False, True])
def test_env_raising_in_worker_names_env_and_exception(logdir, async_envs):
    with pytest.raises(rlkit.EnvError) as e:
        rlkit.train(cfg(logdir, env="rlkit-test/Raising-v0", async_envs=async_envs))
    msg = one_line(e)
    assert "rlkit-test/Raising-v0" in msg and "simulated physics blow-up" in msg


def test_existing_run_is_not_overwritten(logdir):
    first = rlkit.train(cfg(logdir, env="CartPole-v1", run_name="keep"))
    ckpt = Path(first.run_dir) / "checkpoints"
    before = sorted(p.name for p in ckpt.iterdir())
    with pytest.raises(rlkit.ConfigError) as e:
        rlkit.train(cfg(logdir, env="CartPole-v1", run_name="keep"))
    assert "--resume" in one_line(e)
    assert sorted(p.name for p in ckpt.iterdir()) == before


def test_cli_errors_are_one_line_with_exit_code_2(logdir, capsys):
    assert main(["train", "--env", "NoSuchEnv-v9", "--logdir", logdir]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlkit: error:") and "NoSuchEnv-v9" in err and "\n" not in err
    assert main(["train", "--num-minibatches", "3", "--logdir", logdir]) == 2
    assert "does not divide" in capsys.readouterr().err
    assert main(["eval", str(Path(logdir) / "missing")]) == 2
    assert "no checkpoint" in capsys.readouterr().err


def test_console_script_help_lists_documented_flags():
    out = subprocess.run([sys.executable, "-m", "rlkit.cli", "train", "--help"], capture_output=True, text=True,
                         check=True).stdout
    for flag in ("--env", "--seed", "--total-steps", "--num-envs", "--num-steps", "--num-minibatches",
                 "--update-epochs", "--learning-rate", "--anneal-lr", "--no-anneal-lr", "--gamma", "--gae-lambda",
                 "--clip-coef", "--clip-vloss", "--no-clip-vloss", "--ent-coef", "--vf-coef", "--max-grad-norm",
                 "--target-kl", "--norm-obs", "--norm-reward", "--async-envs", "--logdir", "--run-name", "--resume",
                 "--device", "--preset"):
        assert flag in out, flag
    assert "Rollout length per sub-environment" in out  # field docstrings are the help text
