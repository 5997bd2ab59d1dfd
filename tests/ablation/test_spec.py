"""Sweep specs: expansion into runs, and every malformed spec a one-line error naming file and key."""

import pytest

from rlkit.ablation.spec import expand, load_spec
from rlkit.cli import main
from rlkit.errors import ConfigError

BASE = {"name": "t", "envs": ["CartPole-v1"], "seeds": 2, "preset": "cartpole", "total_steps": 1024,
        "variants": {"ppo": {}, "hp3o": {"presets": ["hp3o"]}}}


def test_expansion_crosses_variants_grid_envs_and_seeds():
    spec = expand({**BASE, "envs": ["CartPole-v1", "Acrobot-v1"], "grid": {"clip_coef": [0.1, 0.3]},
                   "variants": {**BASE["variants"], "sb3:ppo": {}}, "env": {"Acrobot-v1": {"ent_coef": 0.0}}})
    assert len(spec.runs) == 2 * (2 * 2 + 1) * 2
    names = {r.variant for r in spec.runs}
    assert names == {"ppo[clip_coef=0.1]", "ppo[clip_coef=0.3]", "hp3o[clip_coef=0.1]", "hp3o[clip_coef=0.3]", "sb3:ppo"}
    acro = [r for r in spec.runs if r.env == "Acrobot-v1" and r.kind == "rlkit"]
    assert all(r.config["ent_coef"] == 0.0 and r.config["total_steps"] == 1024 for r in acro)
    hp3o = [r for r in spec.runs if r.variant.startswith("hp3o")]
    assert all(r.config["hp3o"] and r.config["num_minibatches"] == 10 for r in hp3o)
    assert len({r.name for r in spec.runs}) == len(spec.runs) and all("/" not in r.name for r in spec.runs)
    shown = {r.hparams for r in spec.runs}  # every run's hparams: env, seed and what differs between the rlkit runs
    assert len(shown) == 1 and next(iter(shown))[:2] == ("env", "seed")
    assert {"clip_coef", "ent_coef", "hp3o"} <= set(next(iter(shown))) and "adam_eps" not in next(iter(shown))


def test_the_smoke_budget_overrides():
    spec = expand({**BASE, "smoke": {"seeds": 1, "total_steps": 512}}, budget="smoke")
    assert spec.seeds == [1] and all(r.config["total_steps"] == 512 for r in spec.runs)


def test_the_smoke_budget_also_replaces_what_an_env_table_sets_and_variants_still_apply():
    env_table = {"CartPole-v1": {"total_steps": 100_000, "eval_every": 10_000, "learning_rate": 1e-3}}
    data = {**BASE, "env": env_table, "smoke": {"total_steps": 512, "eval_every": 256},
            "variants": {"ppo": {}, "low": {"learning_rate": 1e-4}}}
    full, smoke = expand(data), expand(data, budget="smoke")
    assert {r.config["total_steps"] for r in full.runs} == {100_000}
    assert {r.config["total_steps"] for r in smoke.runs} == {512}
    assert {r.config["eval_every"] for r in smoke.runs} == {256}
    assert {r.variant: r.config["learning_rate"] for r in smoke.runs} == {"ppo": 1e-3, "low": 1e-4}


@pytest.mark.parametrize("change,key", [
    ({"bogus": 1}, "bogus"), ({"variants": {}}, "variants"), ({"variants": {"x": {"presets": ["nope"]}}}, "variants.x"),
    ({"variants": {"sb3:a2c": {}}}, "variants.sb3:a2c"), ({"grid": {"clip_coef": []}}, "grid.clip_coef"),
    ({"grid": {"nope": [1]}}, "grid.nope"), ({"total_steps": 0}, "total_steps"), ({"seeds": 0}, "seeds"),
    ({"seeds": [1, 1]}, "seeds"), ({"envs": []}, "envs"), ({"baseline": "nope"}, "baseline"),
    ({"variants": {"x": {"learning_rate": -1}}}, "learning_rate"), ({"name": "a/b"}, "name"),
    ({"hparams": ["gamma"]}, "hparams"), ({"variants": {"x": {"hparams": ["gamma"]}}}, "hparams"),
])
def test_bad_specs_name_file_and_key(change, key):
    with pytest.raises(ConfigError, match="spec.toml") as e:
        expand({**BASE, **change}, "spec.toml")
    assert key in str(e.value) and "\n" not in str(e.value)


def test_bad_toml_and_missing_files_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed")
    assert main(["sweep", str(bad)]) == 2
    assert "not valid TOML" in capsys.readouterr().err
    assert main(["sweep", str(tmp_path / "none.toml")]) == 2
    with pytest.raises(ConfigError, match="smoke"):
        load_spec(_write(tmp_path, 'name = "t"\nenvs = ["CartPole-v1"]\nseeds = 1\n[variants]\nppo = {}\n'), "smoke")


def _write(tmp_path, text):
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("change,where,option", [
    ({"grid": {"kl_beta": [1.0, 3.0]}, "variants": {"ppo": {}, "klfix": {"kl_fixed": True}}}, "grid", "kl_beta = 1.0"),
    ({"grid": {"outer_lr": [1.0]}}, "grid", "outer_lr = 1.0"),
    ({"variants": {"ppo": {"kl_dtarg": 0.01}}}, "variants.ppo", "kl_dtarg = 0.01"),
    ({"variants": {"ppo": {"hp3o_buffer_size": 20}}}, "variants.ppo", "hp3o_buffer_size = 20"),
])
def test_a_variant_option_named_for_runs_whose_variant_stays_off_is_refused(change, where, option):
    """At its default, such an option gives plain PPO under the option's name (a grid point at the
    default is the grid's baseline only in name); named away from its default it is refused by the
    config already. A top-level option is a shared setting and stays allowed."""
    with pytest.raises(ConfigError, match="stays off") as e:
        expand({**BASE, **change}, "spec.toml")
    assert f"spec.toml: {where}" in str(e.value) and option in str(e.value) and "\n" not in str(e.value)
    assert "--" not in str(e.value)  # a spec turns a variant on with a field, not a flag
    shared = expand({**BASE, "kl_beta": 1.0, "variants": {"ppo": {}, "klfix": {"kl_fixed": True}}})
    assert {r.variant for r in shared.runs} == {"ppo", "klfix"}
    on = expand({**BASE, "grid": {"kl_beta": [1.0, 3.0]}, "variants": {"klfix": {"kl_fixed": True}}})
    assert sorted({r.config["kl_beta"] for r in on.runs}) == [1.0, 3.0]


def test_an_unknown_field_points_to_plug_ins():
    with pytest.raises(ConfigError, match=r"variants\.x\.cap_norm: not a TrainConfig field .*RLKIT_VARIANTS"):
        expand({**BASE, "variants": {"x": {"cap_norm": 0.1}}}, "spec.toml")


@pytest.mark.parametrize("change,where", [
    ({"learning_rate": -1}, "learning_rate"),  # the top level: its key is the field
    ({"env": {"CartPole-v1": {"learning_rate": -1}}}, "env.CartPole-v1"),
    ({"variants": {"ppo": {"learning_rate": -1}}}, "variants.ppo"),
    ({"learning_rate": 1.0, "variants": {"ppo": {"learning_rate": -1}}}, "variants.ppo"),  # the later layer sets it
    ({"grid": {"learning_rate": [-1]}}, "grid"),
])
def test_a_refused_field_is_named_where_the_spec_sets_it(change, where):
    with pytest.raises(ConfigError) as e:
        expand({**BASE, **change}, "spec.toml")
    assert str(e.value).split(": ")[1] == where, str(e.value)


@pytest.mark.parametrize("name", ["-x", "..", ".hidden", "é ü", "_a"])
def test_a_variant_name_that_cannot_begin_a_folder_name_is_refused(name):
    with pytest.raises(ConfigError, match="starts with a letter or digit") as e:
        expand({**BASE, "variants": {"ppo": {}, name: {"clip_coef": 0.25}}}, "spec.toml")
    assert f"variants.{name}" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["a,b", "ppo ", "x\t"])
def test_a_variant_name_report_variants_could_not_name_is_refused(name):
    with pytest.raises(ConfigError, match="no comma and no leading or trailing space"):
        expand({**BASE, "variants": {"ppo": {}, name: {"clip_coef": 0.25}}}, "spec.toml")
