"""``--help`` shows what a command honours: every flag and positional argument of every command
has help text, ``rlkit train`` and ``rlkit rlhf`` list only the variant options their trainer
honours, in groups (environment, run, evaluation, compute, ppo, one per variant), and an option
a trainer refuses is refused in one line from the command line and from Python alike."""

import re

import pytest

import rlkit
from rlkit.cli import main
from rlkit.errors import ConfigError
from rlkit.rlhf.config import RLHFConfig
from rlkit.variants import registered

COMMANDS = [["train"], ["rlhf"], ["rm", "train"], ["eval"], ["sweep"], ["report"], ["records"], ["rlhf", "tiny-models"], ["rlhf", "eval"],
            *[["report", tool] for tool in ("walltime", "tags", "staleness", "scalars")]]


def help_text(capsys, monkeypatch, *command: str) -> str:
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def help_entries(text: str) -> dict[str, str]:
    """Each flag or positional argument of a --help text -> its help: tyro's groups (boxed on a
    terminal, ``--flag TYPE   help`` with continuation lines) and argparse's sections alike."""
    entries: dict[str, str] = {}
    current, indent, section = None, 0, False
    for raw in text.splitlines():
        boxed = raw.startswith("│") and raw.endswith("│")
        line = (raw[1:-1] if boxed else raw).rstrip()
        stripped = line.strip()
        if not stripped or raw.startswith(("╭", "╰")) or set(stripped) <= {"─", "-"}:
            current = None
            continue
        depth = len(line) - len(line.lstrip())
        if current is not None and depth > indent + 1:
            entries[current] += " " + stripped
            continue
        current, section = None, section or (depth == 0 and stripped.endswith(":"))  # argparse's "options:"
        if stripped.startswith("-") and depth <= 2 or section and depth == 2:
            parts = re.split(r"\s{2,}", stripped, maxsplit=1)
            current, indent = parts[0].split()[0].rstrip(","), depth
            entries[current] = parts[1] if len(parts) > 1 else ""
    return entries


def without_defaults(text: str) -> str:
    return re.sub(r"\(default: [^)]*\)", "", text).strip()


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_flag_and_argument_of_every_command_has_help(capsys, monkeypatch, command):
    entries = help_entries(help_text(capsys, monkeypatch, *command))
    assert len(entries) > 1, entries  # the parser read the help at all
    assert [name for name, text in entries.items() if not without_defaults(text)] == []


def test_the_help_parser_sees_a_flag_without_help():
    text = "usage: x\n\npositional arguments:\n  spec\n\noptions:\n  -h, --help  show this help\n  --out OUT\n"
    assert help_entries(text) == {"spec": "", "-h": "show this help", "--out": ""}
    boxed = ("╭─ options ─╮\n│ --a INT   Some help. (default: 1)  │\n│ --b INT   (default: 2)  │\n"
             "│ --c-long, --no-c-long  │\n│           wrapped help  │\n╰────╯\n")
    ruled = " options\n -------\n  --a INT   Some help.\n  --b INT   (default: 2)\n  --c-long\n            wrapped help\n"
    for text in (boxed, ruled):
        assert {k: without_defaults(v) for k, v in help_entries(text).items()} == {
            "--a": "Some help.", "--b": "", "--c-long": "wrapped help"}
    assert groups(boxed) == groups(ruled) == {"options": ["--a", "--b", "--c-long"]}


def groups(text: str) -> dict[str, list[str]]:
    """Each group of a tyro --help (a box on a terminal, a title over a rule otherwise) -> its flags."""
    lines, out, title, body = text.splitlines(), {}, None, []
    for i, raw in enumerate(lines):
        ruled = raw.startswith(" ") and raw[1:2] != " " and i + 1 < len(lines) and lines[i + 1][:3] == " --"
        if raw.startswith("╭─ ") or ruled:
            if title:
                out[title] = list(help_entries("\n".join(body)))
            title, body = raw[3:].split(" ─")[0] if raw.startswith("╭") else raw.strip(), []
        elif title:
            body.append(raw)
    if title:
        out[title] = list(help_entries("\n".join(body)))
    return out


def test_train_help_groups_its_flags_and_lists_no_option_it_refuses(capsys, monkeypatch):
    shown = groups(help_text(capsys, monkeypatch, "train"))
    assert list(shown) == ["options", "environment options", "run options", "evaluation options",
                           "recurrent options", "compute options", "ppo options", "variants.outer options", "variants.hp3o options", "variants.no-clip options",
                           "variants.kl-fixed options", "variants.kl-adaptive options", "variants.anneal-clip options"]
    assert shown["variants.no-clip options"] == ["--unclipped"]
    assert shown["variants.kl-fixed options"] == ["--kl-fixed", "--kl-beta"]
    assert shown["variants.kl-adaptive options"] == ["--kl-adaptive", "--kl-dtarg", "--kl-beta-init"]
    assert shown["variants.anneal-clip options"] == ["--anneal-clip"]
    assert {"--env", "--env-kwargs", "--env-wrappers", "--norm-obs"} <= set(shown["environment options"])
    assert {"--logdir", "--run-name", "--resume", "--checkpoint-every", "--preset", "--seeds",
            "--population"} <= set(shown["run options"])
    assert set(shown["evaluation options"]) == {"--eval-episodes", "--eval-every", "--eval-max-steps"}
    assert shown["recurrent options"] == ["--memory", "--memory-size", "--bptt-length"]
    assert set(shown["compute options"]) == {"--device", "--torch-threads", "--kernels", "--async-envs",
                                             "--env-backend"}
    flags = [f for group in shown.values() for f in group]
    assert not [f for f in flags if f.startswith("--group-")] and "--hparams" not in flags
    assert {"--hp3o-plus", "--hp3o-samples", "--outer-lr"} <= set(flags)


def test_rlhf_help_lists_only_the_hp3o_options_the_rlhf_trainer_honours(capsys, monkeypatch):
    shown = groups(help_text(capsys, monkeypatch, "rlhf"))
    assert list(shown) == ["options", "model options", "rewards options", "prompt-format options", "responses options",
                           "kl options", "run options",
                           "compute options", "ppo options", "variants.outer options", "variants.hp3o options",
                           "variants.group options", "variants.no-clip options", "variants.loss-type options"]
    assert shown["variants.loss-type options"] == ["--loss-type"]
    assert shown["rewards options"] == ["--reward", "--reward-weights"]
    assert shown["prompt-format options"] == ["--chat-template", "--system-prompt"]
    assert shown["variants.hp3o options"] == ["--hp3o", "--hp3o-buffer-size", "--hp3o-trajectories"]
    assert shown["variants.hp3o options"] == ["--" + n.replace("_", "-") for n in registered()["hp3o"].honours("rlhf")]
    assert "--group-size" in shown["variants.group options"]
    assert shown["variants.no-clip options"] == ["--unclipped"]
    penalties = {"--" + n.replace("_", "-") for v in ("kl_fixed", "kl_adaptive")
                 for n in registered()[v].options.__dataclass_fields__}  # the Gymnasium trainer's only
    assert penalties == {"--kl-fixed", "--kl-beta", "--kl-adaptive", "--kl-dtarg", "--kl-beta-init"}
    assert not penalties & {f for group in shown.values() for f in group}


def test_each_trainers_options_are_what_the_registry_says_it_honours():
    from rlkit.variants import RLHFVariantGroups, VariantGroups
    from rlkit.variants.registry import CONTAINER_ATTRIBUTES

    for container, trainer in ((VariantGroups, "gym"), (RLHFVariantGroups, "rlhf")):
        held = {name: tuple(type(getattr(container(), name)).__dataclass_fields__) for name in
                container.__dataclass_fields__}
        assert held == {v.name: v.honours(trainer) for v in registered().values() if v.honours(trainer)}
    assert "group" not in VariantGroups.__dataclass_fields__ and "group" in RLHFVariantGroups.__dataclass_fields__
    public = {n for n in dir(VariantGroups) if not n.startswith("_")} - set(VariantGroups.__dataclass_fields__)
    assert public == CONTAINER_ATTRIBUTES  # a variant may take none of them as its name


@pytest.mark.parametrize("make, message", [
    (lambda: RLHFConfig(hp3o=True, hp3o_plus=True), "the RLHF trainer does not honour hp3o_plus (variant hp3o: "
                                                    "Gymnasium trainer only); leave hp3o_plus at its default"),
    (lambda: RLHFConfig().replace(hp3o_samples=64), "does not honour hp3o_samples"),
    (lambda: rlkit.TrainConfig(group_size=4), "variant group is not offered by the Gymnasium trainer (RLHF trainer "
                                              "only); leave group_size at its default"),
    (lambda: rlkit.TrainConfig.from_dict({**rlkit.TrainConfig().to_dict(), "group_form": "grpo"}), "group_form"),
    (lambda: RLHFConfig(kl_beta=3.0), "variant kl_fixed is not offered by the RLHF trainer (Gymnasium trainer only)"),
    (lambda: RLHFConfig().replace(kl_adaptive=True), "variant kl_adaptive is not offered by the RLHF trainer"),
])
def test_an_option_the_trainer_refuses_is_one_line_from_python(make, message):
    with pytest.raises(ConfigError) as refused:
        make()
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_a_record_with_every_option_at_its_default_loads():
    """config.json of a run written with every variant's options (the refused ones at their
    defaults) reads as the config; the options a trainer refuses are not in its record."""
    gym_record = {**rlkit.TrainConfig(outer_lr=1.5).to_dict(), "group_size": 1, "group_form": "rloo",
                  "group_eps": 1e-4}
    assert rlkit.TrainConfig.from_dict(gym_record) == rlkit.TrainConfig(outer_lr=1.5)
    rlhf_record = {**RLHFConfig(hp3o=True, hp3o_trajectories=4).to_dict(), "hp3o_plus": False, "hp3o_samples": 1280}
    assert RLHFConfig.from_dict(rlhf_record) == RLHFConfig(hp3o=True, hp3o_trajectories=4)
    assert RLHFConfig(hp3o_plus=False).to_dict() == RLHFConfig().to_dict()
    assert not {k for k in rlkit.TrainConfig().to_dict() if k.startswith("group_")}
    assert [k for k in RLHFConfig().to_dict() if k.startswith("hp3o")] == ["hp3o", "hp3o_buffer_size",
                                                                           "hp3o_trajectories"]


@pytest.mark.parametrize("argv, message", [
    (["train", "--group-size", "4"], "--group-size is refused: variant group is not offered by the Gymnasium trainer"),
    (["rlhf", "--hp3o-plus"], "--hp3o-plus is refused: the RLHF trainer does not honour hp3o_plus"),
    (["rlhf", "--no-hp3o-redraw-each-epoch"], "the RLHF trainer does not honour hp3o_redraw_each_epoch"),
    (["rlhf", "--kl-fixed"], "--kl-fixed is refused: variant kl_fixed is not offered by the RLHF trainer"),
    (["rlhf", "--kl-dtarg", "0.02"], "--kl-dtarg is refused: variant kl_adaptive is not offered by the RLHF trainer"),
    (["train", "--hparams", "env"], "--hparams"),
])
def test_a_flag_the_trainer_refuses_is_one_line(capsys, argv, message, tmp_path):
    assert main([*argv, "--logdir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "runs").exists()


def test_hparams_is_set_from_python_and_by_the_sweep_not_on_the_command_line():
    assert rlkit.TrainConfig(hparams=("env", "seed")).hparams == ("env", "seed")
