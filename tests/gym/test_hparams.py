"""What a run's TensorBoard hparams show, read back from its event files: a single run its key
settings (and the fields its command line sets), a resumed run nothing new, and no run an
experiment summary (TensorBoard then puts the fields that differ between runs first)."""

from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
from tensorboard.plugins.hparams import metadata

import rlkit
from rlkit.cli import main
from rlkit.errors import ConfigError
from rlkit.gym.config import TrainConfig
from rlkit.gym.trainer import resume

KEY = {"variant", "env", "seed", "total_steps", "learning_rate", "num_envs", "num_steps"}


def hparams_summaries(run_dir: Path) -> list[tuple[str, bytes]]:
    """``(tag, content)`` of every hparams-plugin summary in ``run_dir``'s event files, in file order."""
    out = []
    for path in sorted(Path(run_dir).glob("events.out.tfevents.*")):
        for event in LegacyEventFileLoader(str(path)).Load():
            out += [(v.tag, v.metadata.plugin_data.content) for v in event.summary.value
                    if v.metadata.plugin_data.plugin_name == metadata.PLUGIN_NAME]
    return out


def shown(run_dir: Path) -> dict[str, object]:
    """The hparams of the run's one session-start info (and the run has no experiment summary)."""
    summaries = hparams_summaries(run_dir)
    assert [tag for tag, _ in summaries] == [metadata.SESSION_START_INFO_TAG], summaries
    info = metadata.parse_session_start_info_plugin_data(summaries[0][1])
    return {k: getattr(v, v.WhichOneof("kind")) for k, v in info.hparams.items()}


def small(tmp_path, **fields):
    return rlkit.preset("cartpole", total_steps=512, eval_episodes=0, progress=False, logdir=str(tmp_path),
                        run_name="r", **fields)


def test_a_single_run_shows_its_key_settings_and_what_is_set_away_from_the_defaults(tmp_path):
    cfg = small(tmp_path, gamma=0.98)
    rlkit.train(cfg)
    values = shown(tmp_path / "r")
    away = {k for k, v in cfg.to_dict().items() if v != TrainConfig().to_dict()[k]} - {"logdir", "run_name", "progress"}
    assert set(values) == KEY | away and "gamma" in away and "adam_eps" not in values
    assert values["variant"] == "ppo" and values["env"] == "CartPole-v1" and values["gamma"] == pytest.approx(0.98)
    text = (tmp_path / "r" / "config.json").read_text()
    assert '"adam_eps"' in text and '"hparams": []' in text  # the full config stays in config.json


def test_a_variants_options_are_shown_set_or_not(tmp_path):
    rlkit.train(small(tmp_path, outer_lr=1.5))
    values = shown(tmp_path / "r")
    options = {f for f in rlkit.variants.registered()["outer"].options.__dataclass_fields__}
    assert options <= set(values) and values["outer_lr"] == 1.5 and values["outer_momentum"] == 0.0
    assert values["variant"] == "outer-lr1.5" and "hp3o" not in values


def test_rlkit_train_adds_the_fields_its_command_line_sets(tmp_path):
    """``--gamma 0.99`` (the default) and ``--ent-coef``: shown; --logdir, --run-name: not settings."""
    assert main(["train", "--preset", "cartpole", "--total-steps", "512", "--eval-episodes", "0", "--gamma", "0.99",
                 "--ent-coef", "0.0", "--logdir", str(tmp_path), "--run-name", "r", "--no-progress"]) == 0
    values = shown(tmp_path / "r")
    assert {"gamma", "ent_coef", "eval_episodes"} | KEY <= set(values)
    assert not {"logdir", "run_name", "progress", "hparams"} & set(values)


def test_named_hparams_are_all_a_run_shows_and_a_resume_writes_none(tmp_path):
    rlkit.train(small(tmp_path, hparams=("env", "seed", "clip_coef"), checkpoint_every=512))
    assert set(shown(tmp_path / "r")) == {"variant", "env", "seed", "clip_coef"}
    resume(str(tmp_path / "r"), total_steps=1024)
    assert len(list((tmp_path / "r").glob("events.out.tfevents.*"))) == 2
    assert set(shown(tmp_path / "r")) == {"variant", "env", "seed", "clip_coef"}  # still the one, from the first file


def test_hparams_must_name_config_fields():
    with pytest.raises(ConfigError, match="hparams names no config field nope"):
        TrainConfig(hparams=("seed", "nope"))
