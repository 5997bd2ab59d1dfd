"""The shared PPO hyperparameters composed into both configs: flat fields, flat flags,
flat JSON, one error type."""

import dataclasses
import inspect

import pytest

import rlkit
import rlkit.errors as errors
from rlkit.core.config import PPOConfig
from rlkit.errors import ConfigError, RlkitError
from rlkit.rlhf.config import RLHFConfig


PROPERTIES = {  # each config's every property, on a config whose fields make each value distinct
    rlkit.TrainConfig: (dict(num_envs=4, num_steps=96, total_steps=10_000, checkpoint_every=1_000, hp3o=True,
                             env_kwargs='{"gravity": 9.0}'),
                        {"batch_size": 384, "num_updates": 26, "checkpoint_every_updates": 2,
                         "env_options": {"gravity": 9.0}, "variant": "hp3o"}),
    RLHFConfig: (dict(num_envs=4, max_new_tokens=8, checkpoint_every=100, outer=True),
                 {"checkpoint_every_updates": 3, "variant": "outer-lr1"}),
}


@pytest.mark.parametrize("cls", [rlkit.TrainConfig, RLHFConfig])
def test_every_property_of_both_configs_evaluates_to_its_value(cls):
    """A property shared by both configs once read ``total_steps`` and raised AttributeError on RLHF."""
    fields, expected = PROPERTIES[cls]
    cfg = cls(**fields)
    names = {name for name, member in inspect.getmembers(cls) if isinstance(member, property)}
    assert names == set(expected)  # a new property gets its expected value here
    assert {name: getattr(cfg, name) for name in names} == expected
    assert cls().checkpoint_every_updates == (0 if cls is RLHFConfig else 97)  # the defaults: none; 50,000 steps


@pytest.mark.parametrize("cls", [rlkit.TrainConfig, RLHFConfig])
def test_ppo_fields_are_declared_once_and_read_flat(cls):
    cfg = cls(clip_coef=0.1, outer_lr=1.5)
    assert cfg.ppo.clip_coef == cfg.clip_coef == 0.1 and cfg.variants.outer_lr == cfg.outer_lr == 1.5
    own = {f.name for f in dataclasses.fields(cls)}
    assert not own & {f.name for f in dataclasses.fields(PPOConfig)}
    assert cls.from_dict(cfg.to_dict()) == cfg
    assert "ppo" not in cfg.to_dict() and cfg.to_dict()["clip_coef"] == 0.1  # the flat record, as before


def test_rlhf_keeps_its_own_ppo_defaults():
    assert RLHFConfig().gamma == 1.0 and RLHFConfig().learning_rate == 1e-5 and RLHFConfig().vf_coef == 0.1
    assert rlkit.TrainConfig().gamma == 0.99 and rlkit.TrainConfig().learning_rate == 2.5e-4
    assert RLHFConfig().replace(seed=2).learning_rate == 1e-5


@pytest.mark.parametrize("cfg", [rlkit.TrainConfig(), RLHFConfig()])
def test_unknown_fields_are_a_config_error(cfg):
    """RLHFConfig.replace(bogus=1) used to raise TypeError."""
    with pytest.raises(ConfigError, match="bogus"):
        cfg.replace(bogus=1)
    with pytest.raises(ConfigError, match="bogus"):
        type(cfg).from_dict({**cfg.to_dict(), "bogus": 1})


@pytest.mark.parametrize("field,value", [("clip_coef", -1.0), ("gamma", 1.5), ("update_epochs", 0),
                                         ("learning_rate", "0.1"), ("kernels", "gpu"), ("target_kl", 0.0),
                                         ("adam_eps", 0.0), ("vloss_form", "huber")])
def test_bad_ppo_values_are_one_line_errors_in_both_configs(field, value):
    for cls in (rlkit.TrainConfig, RLHFConfig):
        with pytest.raises(ConfigError, match=field):
            cls().replace(**{field: value})


def test_every_user_facing_error_is_an_rlkit_error():
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, Exception)]
    assert len(classes) >= 8 and all(issubclass(c, RlkitError) for c in classes)


@pytest.mark.parametrize("fields,message", [
    (dict(hp3o="false"), "hp3o must be true or false; got 'false'"),
    (dict(outer="no"), "outer must be true or false"),
    (dict(anneal_lr=1), "anneal_lr must be true or false"),
    (dict(outer_lr="1.5"), "outer_lr must be a number; got '1.5'"),
    (dict(clip_coef=True), "clip_coef must be a finite number"),
    (dict(total_steps=1e6), "total_steps must be an integer"),
    (dict(env=123), "env must be a string; got 123"),
    (dict(run_name=5), "run_name must be a string or None"),
    (dict(hidden_sizes=(64, "a")), "hidden_sizes must be a list whose every item is an integer"),
    (dict(outer_optimizer=3), "outer_optimizer must be a string"),
])
def test_every_field_is_checked_against_its_type(fields, message):
    from rlkit import TrainConfig

    with pytest.raises(ConfigError) as info:
        TrainConfig(**fields)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_sub_config_of_the_wrong_class_is_refused_and_lists_become_tuples():
    from rlkit import TrainConfig
    from rlkit.rlhf.config import RLHFConfig

    with pytest.raises(ConfigError, match="ppo must be a PPOConfig; got a TrainConfig"):
        TrainConfig().replace(ppo=TrainConfig())
    for fields in (dict(kl_estimator="k2"), dict(dtype="float64"), dict(lora_targets=("q", 1))):
        with pytest.raises(ConfigError, match=next(iter(fields))):
            RLHFConfig(**fields)
    assert TrainConfig(hidden_sizes=[32, 32]).hidden_sizes == (32, 32)  # a TOML / JSON list
    assert TrainConfig(outer_lr=2).outer_lr == 2  # an integer is a number


@pytest.mark.parametrize("build,match", [
    (lambda: rlkit.TrainConfig(learning_rate=10**400), "learning_rate must be a finite number"),
    (lambda: RLHFConfig(temperature=10**400), "temperature must be a number"),
    (lambda: rlkit.TrainConfig(vloss_form=__import__("numpy").array(["max", "x"])), "vloss_form must be one of"),
    (lambda: rlkit.TrainConfig(ppo={"clip_coef": 0.1}), "ppo must be a PPOConfig"),
    (lambda: rlkit.TrainConfig(variants=None), "variants must be a VariantGroups"),
    (lambda: rlkit.preset(["hp3o"]), "unknown preset"),
])
def test_odd_values_from_python_are_one_line_errors(build, match):
    with pytest.raises(ConfigError, match=match) as info:
        build()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("flag, value", [("--vf-coef", "1e308"), ("--ent-coef", "3.5e38"), ("--clip-coef", "1e39"),
                                         ("--outer-lr", "1e300"), ("--target-kl", "1e300"), ("--kl-beta", "1e300")])
def test_a_float_that_overflows_float32_is_one_line_before_any_folder(tmp_path, capsys, flag, value):
    from rlkit.cli import main

    assert main(["train", flag, value, "--logdir", str(tmp_path / "runs"), "--total-steps", "256"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rlkit: error: ") and "float32" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("changes", [{"vf_coef": 1e308}, {"gae_lambda": 0.5, "ent_coef": -1e39},
                                     {"outer": True, "outer_momentum": float("nan")}])
def test_configs_and_specs_refuse_floats_float32_cannot_hold(changes):
    from rlkit.ablation.spec import expand

    with pytest.raises(ConfigError):
        rlkit.TrainConfig(**changes)
    with pytest.raises(ConfigError):
        expand({"name": "t", "envs": ["CartPole-v1"], "seeds": 1, "total_steps": 1024, "variants": {"ppo": changes}})
    assert rlkit.TrainConfig(vf_coef=3.4e38).vf_coef == 3.4e38  # within float32
