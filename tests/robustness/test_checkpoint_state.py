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
