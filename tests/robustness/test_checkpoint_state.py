"""Resuming from a checkpoint whose state.json was damaged or edited: one line, never a traceback,
and nothing in the run directory changes."""

import json
import shutil
from pathlib import Path

import pytest

from rlkit.errors import CheckpointError, ConfigError
from rlkit.gym.checkpoint import resume_config
from rlkit.rlhf.checkpoint import config_from_checkpoint
from rlkit.variants.migrate import migrate_checkpoint

LEGACY = Path(__file__).parents[1] / "data" / "legacy"


def _copy(tmp_path: Path, kind: str, edit) -> Path:
    run = tmp_path / kind
    shutil.copytree(LEGACY / kind, run)
    state_file = next(run.glob("checkpoints/*/state.json"))
    state = json.loads(state_file.read_text())
    edit(state)
    state_file.write_text(json.dumps(state))
    return run


def _today(state: dict) -> None:
    """Rewrite a legacy state in today's keys, as a current checkpoint holds them."""
    _, new = migrate_checkpoint({}, state)
    state.clear()
    state.update(new)


@pytest.mark.parametrize("key,value", [("env_steps", "abc"), ("env_steps", None), ("env_steps", -1),
                                       ("update", 1.5), ("update", float("inf")),
                                       ("seconds", "nan"), ("trainer", "x"), ("trainer", ["gym"]),
                                       ("config", "x"), ("config", None), ("variants", [])])
def test_a_damaged_gym_state_is_one_line(tmp_path, key, value):
    run = _copy(tmp_path, "gym", lambda s: (_today(s), s.__setitem__(key, value)))
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    with pytest.raises((CheckpointError, ConfigError)) as info:
        resume_config(str(run), {})
    assert "\n" not in str(info.value) and "Traceback" not in str(info.value)
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("key,value", [("tokens", "abc"), ("tokens", None), ("iteration", "abc"),
                                       ("iteration", -2)])
def test_a_damaged_legacy_rlhf_state_is_one_line(tmp_path, key, value):
    run = _copy(tmp_path, "rlhf", lambda s: s.__setitem__(key, value))
    with pytest.raises(CheckpointError) as info:
        config_from_checkpoint(str(run), {})
    assert "\n" not in str(info.value)


def test_a_legacy_rlhf_record_without_sizes_converts_with_the_defaults(tmp_path):
    from rlkit.rlhf.config import RLHFConfig

    run = _copy(tmp_path, "rlhf", lambda s: s["config"].pop("num_envs"))
    cfg, _ = config_from_checkpoint(str(run), {})
    assert cfg.checkpoint_every == 2 * RLHFConfig().num_envs * cfg.max_new_tokens  # 2 iterations, as it was
    assert cfg.checkpoint_every_updates == 2
    quiet = _copy(tmp_path / "q", "rlhf", lambda s: s["config"].pop("checkpoint_every"))
    assert config_from_checkpoint(str(quiet), {})[0].checkpoint_every == 0  # the default: no checkpoints


def test_a_run_without_checkpoint_and_a_damaged_config_is_one_line(tmp_path):
    for text, kind in (("{", CheckpointError), ("[1, 2]", CheckpointError),
                       (json.dumps({"iterations": 3, "policy": "x"}), ConfigError)):
        run = tmp_path / f"r{len(text)}"
        run.mkdir()
        (run / "config.json").write_text(text)
        with pytest.raises(kind) as info:
            resume_config(str(run), {})
        assert "\n" not in str(info.value)
    assert "rlkit rlhf --resume" in str(info.value)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    import rlkit

    logdir = tmp_path_factory.mktemp("runs")
    rlkit.train(rlkit.preset("cartpole", total_steps=1024, num_envs=2, num_steps=128, eval_episodes=1,
                             checkpoint_every=256, progress=False, logdir=str(logdir), run_name="base"))
    return logdir / "base"


def _tensors(edit):
    def apply(ckpt: Path) -> None:
        from safetensors.torch import load_file, save_file

        tensors = load_file(str(ckpt / "tensors.safetensors"))
        edit(tensors)
        save_file(tensors, str(ckpt / "tensors.safetensors"))
    return apply


def _state(edit):
    def apply(ckpt: Path) -> None:
        state = json.loads((ckpt / "state.json").read_text())
        edit(state)
        (ckpt / "state.json").write_text(json.dumps(state))
    return apply


DAMAGE = {
    "recent returns are strings": _state(lambda s: s.__setitem__("recent_returns", ["a", "b"])),
    "recent returns are mappings": _state(lambda s: s.__setitem__("recent_returns", [{}])),
    "recent returns are not a list": _state(lambda s: s.__setitem__("recent_returns", 3)),
    "obs statistics of another shape": _state(lambda s: s["obs_norm"]["rms"].__setitem__("mean", [0.0])),
    "reward returns of another shape": _state(lambda s: s["rew_scaler"].__setitem__("returns", [0.0] * 5)),
    "updates and steps disagree": _state(lambda s: s.__setitem__("update", s["update"] + 1)),
    "Adam moment in float64": _tensors(lambda t: t.__setitem__("optim.exp_avg", t["optim.exp_avg"].double())),
    "Adam moment of another shape": _tensors(lambda t: t.__setitem__("optim.exp_avg_sq", t["optim.exp_avg_sq"][:5])),
    "Adam step missing": _tensors(lambda t: t.pop("optim.step")),
    "Adam step not a count": _tensors(lambda t: t.__setitem__("optim.step", t["optim.exp_avg"][:3].clone())),
    "non-finite weights": _tensors(lambda t: t[next(k for k in t if k.startswith("model."))].fill_(float("nan"))),
    "weights cast to int32": _tensors(lambda t: t.update({k: t[k].int() for k in t if k.startswith("model.")})),
    "a recent return beyond float": _state(lambda s: s.__setitem__("recent_returns", [10 ** 400])),
    "Adam moment NaN": _tensors(lambda t: t["optim.exp_avg"].fill_(float("nan"))),
    "Adam second moment infinite": _tensors(lambda t: t["optim.exp_avg_sq"].fill_(float("inf"))),
    "Adam second moment negative": _tensors(lambda t: t["optim.exp_avg_sq"].fill_(-1.0)),
    "Adam step zero": _tensors(lambda t: t["optim.step"].fill_(0)),
    "Adam step fractional": _tensors(lambda t: t["optim.step"].fill_(2.5)),
    "Adam step beyond a float32 count": _tensors(lambda t: t["optim.step"].fill_(1e30)),
    "Adam step in bfloat16": _tensors(lambda t: t.__setitem__("optim.step", t["optim.step"].bfloat16())),
    "obs count infinite": _state(lambda s: s["obs_norm"]["rms"].__setitem__("count", float("inf"))),
    "obs count below its start": _state(lambda s: s["obs_norm"]["rms"].__setitem__("count", 1e-300)),
    "obs mean too large to update": _state(lambda s: s["obs_norm"]["rms"].__setitem__("mean", [1e308] * 4)),
    "obs clip NaN": _state(lambda s: s["obs_norm"].__setitem__("clip", float("nan"))),
    "obs clip zero": _state(lambda s: s["obs_norm"].__setitem__("clip", 0.0)),
    "obs normalization switched": _state(lambda s: s["obs_norm"].__setitem__("enabled", not s["obs_norm"]["enabled"])),
    "reward count infinite": _state(lambda s: s["rew_scaler"]["rms"].__setitem__("count", float("inf"))),
    "reward clip negative": _state(lambda s: s["rew_scaler"].__setitem__("clip", -1.0)),
    "reward returns not finite": _state(lambda s: s["rew_scaler"].__setitem__("returns", [float("nan")] * 2)),
    "obs count a string": _state(lambda s: s["obs_norm"]["rms"].__setitem__("count", "260.0001")),
    "obs count a boolean": _state(lambda s: s["obs_norm"]["rms"].__setitem__("count", True)),
    "obs mean strings": _state(lambda s: s["obs_norm"]["rms"].__setitem__("mean", ["0.1"] * 4)),
    "reward returns strings": _state(lambda s: s["rew_scaler"].__setitem__("returns", ["1.5", "2.5"])),
    "eval history garbled": _state(lambda s: s.__setitem__("eval_history", [["x", "y", "z"], [1]])),
    "eval seconds a string": _state(lambda s: s.__setitem__("eval_seconds", "abc")),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_checkpoint_is_one_line_on_resume_and_changes_nothing(tmp_path, small_run, damage):
    from rlkit.gym.trainer import resume
    from rlkit.io.checkpoint import resolve_checkpoint

    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    DAMAGE[damage](resolve_checkpoint(run))
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".rlkit-run.lock"}
    with pytest.raises((CheckpointError, ConfigError)) as info:
        resume(str(run), total_steps=2048)
    assert "\n" not in str(info.value) and "Traceback" not in str(info.value)
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".rlkit-run.lock"} == before


@pytest.fixture(scope="module")
def variant_run(tmp_path_factory):
    import rlkit

    logdir = tmp_path_factory.mktemp("variant-runs")
    rlkit.train(rlkit.preset("cartpole", "outer-nesterov", "hp3o", total_steps=1024, num_envs=2, num_steps=128,
                             eval_episodes=1, checkpoint_every=256, progress=False, logdir=str(logdir), run_name="v"))
    return logdir / "v"


VARIANT_DAMAGE = {
    "Outer-PPO momentum truncated": _tensors(lambda t: t.__setitem__("outer.momentum_buffer",
                                                                     t["outer.momentum_buffer"][:7].clone())),
    "Outer-PPO momentum NaN": _tensors(lambda t: t["outer.momentum_buffer"].fill_(float("nan"))),
    "HP3O return beyond float": _state(lambda s: s["variants"]["hp3o"][0].__setitem__("episode_return", 10 ** 400)),
    "HP3O rewards NaN": _tensors(lambda t: t["hp3o.0.rewards"].fill_(float("nan"))),
    "HP3O observations of another width": _tensors(lambda t: t.__setitem__("hp3o.0.obs", t["hp3o.0.obs"][:, :3].clone())),
    "HP3O steps of different lengths": _tensors(lambda t: t.__setitem__("hp3o.0.values", t["hp3o.0.values"][:1].clone())),
}


@pytest.mark.parametrize("damage", VARIANT_DAMAGE)
def test_damaged_variant_state_is_one_line_on_resume(tmp_path, variant_run, damage):
    from rlkit.gym.trainer import resume
    from rlkit.io.checkpoint import resolve_checkpoint

    run = tmp_path / "run"
    shutil.copytree(variant_run, run)
    VARIANT_DAMAGE[damage](resolve_checkpoint(run))
    with pytest.raises(CheckpointError) as info:
        resume(str(run), total_steps=2048)
    assert "\n" not in str(info.value) and ("Outer-PPO" in str(info.value) or "HP3O" in str(info.value))


def test_json_nested_too_deep_reads_as_damaged(tmp_path, small_run):
    from rlkit.gym.trainer import resume
    from rlkit.io.checkpoint import resolve_checkpoint

    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    deep = "[" * 200_000 + "]" * 200_000
    (run / "checkpoints" / "latest.json").write_text(deep)
    assert resolve_checkpoint(run).parent == run / "checkpoints"
    (resolve_checkpoint(run) / "state.json").write_text(deep)  # the newest: the older checkpoint stands in
    assert resume(str(run), total_steps=1280).updates == 5


def test_a_latest_pointer_too_long_for_a_file_name_is_ignored(tmp_path, small_run):
    from rlkit.io.checkpoint import resolve_checkpoint

    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    (run / "checkpoints" / "latest.json").write_text(json.dumps({"checkpoint": "u" * 5000}))
    assert resolve_checkpoint(run).parent == run / "checkpoints"


def test_a_latest_pointer_out_of_the_run_is_ignored(tmp_path, small_run):
    from rlkit.io.checkpoint import resolve_checkpoint

    run, other = tmp_path / "run", tmp_path / "other"
    shutil.copytree(small_run, run)
    shutil.copytree(small_run, other)
    (run / "checkpoints" / "latest.json").write_text(json.dumps({"checkpoint": "../../other/checkpoints/update-0000004"}))
    assert resolve_checkpoint(run).parent == run / "checkpoints"
