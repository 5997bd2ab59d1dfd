"""``--env-kwargs``: gymnasium.make arguments kept with the run and used again by resume, eval and sweeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rlkit
from rlkit.ablation.spec import expand
from rlkit.cli import main
from rlkit.errors import ConfigError, EnvError

NOT_SLIPPERY = '{"is_slippery": false}'


@pytest.mark.parametrize("text", ["[1]", "{nope", "3", '"x"', "null", '{"a": 1, "a": 2}', {"is_slippery": False}])
def test_anything_but_a_json_object_is_one_line(text, logdir):
    with pytest.raises(ConfigError, match="env_kwargs"):
        rlkit.TrainConfig(env="FrozenLake-v1", env_kwargs=text, logdir=logdir)


def test_an_unknown_keyword_names_the_env_and_writes_nothing(logdir):
    cfg = rlkit.TrainConfig(env="FrozenLake-v1", env_kwargs='{"bogus": 1}', total_steps=512, logdir=logdir)
    with pytest.raises(EnvError, match="FrozenLake-v1.*bogus"):
        rlkit.train(cfg)
    assert not Path(logdir).exists() or not any(Path(logdir).iterdir())


def test_kept_with_the_run_and_used_by_resume_and_eval(logdir, capsys):
    """A deterministic lake is solved in 6 steps; the slippery default almost never is, so an eval
    that forgot the arguments would show in the episode lengths."""
    args = ["train", "--env", "FrozenLake-v1", "--env-kwargs", NOT_SLIPPERY, "--total-steps", "12288",
            "--num-envs", "4", "--num-steps", "256", "--ent-coef", "0.01", "--learning-rate", "0.003",
            "--logdir", logdir, "--run-name", "lake", "--checkpoint-every", "4096", "--no-progress"]
    assert main(args) == 0
    run = Path(logdir) / "lake"
    assert json.loads((run / "config.json").read_text())["env_kwargs"] == NOT_SLIPPERY
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "5", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["eval_return_mean"] == 1.0 and out["eval_steps"] == 5 * 6
    assert main(["train", "--resume", str(run), "--total-steps", "16384", "--no-progress"]) == 0
    resumed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert resumed["total_steps"] == 16384 and resumed["eval_return_mean"] == 1.0
    assert main(["train", "--resume", str(run), "--env-kwargs", "{}"]) == 2  # a resumed run keeps its env
    assert "cannot change env_kwargs" in capsys.readouterr().err


def test_sweep_specs_take_a_table_per_env_and_refuse_mixed_ones():
    base = {"name": "t", "envs": ["FrozenLake-v1"], "seeds": 1, "total_steps": 1024, "variants": {"ppo": {}, "b": {}}}
    spec = expand({**base, "env": {"FrozenLake-v1": {"env_kwargs": {"is_slippery": False}}}})
    assert {r.config["env_kwargs"] for r in spec.runs} == {NOT_SLIPPERY}
    assert spec.env_options() == {"FrozenLake-v1": {"is_slippery": False}}
    with pytest.raises(ConfigError, match="env_kwargs differ"):
        expand({**base, "variants": {"ppo": {}, "b": {"env_kwargs": NOT_SLIPPERY}}}, "spec.toml")
    with pytest.raises(ConfigError, match="env_wrappers differ"):  # the report plays one env per id too
        expand({**base, "envs": ["MiniGrid-Empty-5x5-v0"], "env_wrappers": "minigrid",
                "variants": {"ppo": {}, "b": {"env_wrappers": ""}}}, "spec.toml")


def test_a_missing_optional_dependency_names_the_extra(logdir):
    import gymnasium as gym

    if "rlkit-test/NoBox2D-v0" not in gym.registry:  # an entry point in Box2D's package that does not import
        gym.register("rlkit-test/NoBox2D-v0", entry_point="gymnasium.envs.box2d.rlkit_not_here:Env")
    with pytest.raises(EnvError, match=r"pip install 'rlkit\[box2d\]'"):
        rlkit.train(rlkit.TrainConfig(env="rlkit-test/NoBox2D-v0", total_steps=512, logdir=logdir))


def test_a_sweep_with_unusable_env_kwargs_is_refused_before_anything_is_written(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('name = "t"\nenvs = ["FrozenLake-v1"]\nseeds = 1\ntotal_steps = 1024\n'
                    '[env."FrozenLake-v1"]\nenv_kwargs = {bogus = 1}\n[variants]\nppo = {}\n')
    out = tmp_path / "sweep"
    assert main(["sweep", str(spec), "--out", str(out), "--dry-run"]) == 2
    assert main(["sweep", str(spec), "--out", str(out)]) == 2
    assert not out.exists()


def test_a_value_the_env_cannot_take_names_the_kwargs_and_the_error_type(logdir, capsys):
    """FrozenLake looks ``map_name`` up in its maps: a bare ``5`` would not say that it is a KeyError."""
    assert main(["train", "--env", "FrozenLake-v1", "--env-kwargs", '{"map_name": 5}', "--logdir", logdir]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == "rlkit: error: could not make 'FrozenLake-v1' with --env-kwargs {\"map_name\": 5}: KeyError: 5"
    assert not Path(logdir).exists() or not any(Path(logdir).iterdir())
