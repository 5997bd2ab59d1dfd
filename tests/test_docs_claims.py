"""What README.md and docs/ state as lists and counts is what the code does: the keys the commands
print, the default run name, the presets and help groups, the tables' columns, the logged scalars
and the recipes' variant and seed counts."""

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from rlkit.ablation.results import RESULT_COLUMNS, RUN_COLUMNS
from rlkit.ablation.spec import load_spec
from rlkit.cli import main
from rlkit.gym.config import PRESETS
from rlkit.io.checkpoint import run_dir_of
from rlkit.variants.registry import registered

ROOT = Path(__file__).parents[1]
GUIDE = (ROOT / "docs" / "getting-started.md").read_text()


def doc(name: str) -> str:
    return (ROOT / name).read_text()


def one_line(text: str) -> str:
    return " ".join(text.split())


def quoted_keys(text: str) -> list[str]:
    return re.findall(r'"([a-z_0-9]+)"', text)


def ticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args)) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny CartPole run with an evaluation, named by default: (its JSON line, its directory)."""
    logdir = tmp_path_factory.mktemp("runs")
    line = json.loads(cli("train", "--env", "CartPole-v1", "--total-steps", "512", "--num-envs", "2",
                          "--num-steps", "128", "--eval-episodes", "1", "--logdir", str(logdir),
                          "--no-progress").strip().splitlines()[-1])
    return line, run_dir_of(line["run_dir"])


def test_the_guide_lists_every_key_rlkit_train_prints(trained):
    stated = re.search(r"`rlkit train` ends with one JSON line: `(\{[^`]*\})`", one_line(GUIDE))
    assert stated, "docs/getting-started.md no longer states rlkit train's JSON keys"
    assert quoted_keys(stated.group(1)) == list(trained[0])


def test_the_guide_lists_every_key_rlkit_eval_prints(trained):
    stated = re.search(r"`rlkit eval` prints one: `(\{[^`]*\})`", one_line(GUIDE))
    assert stated, "docs/getting-started.md no longer states rlkit eval's JSON keys"
    printed = json.loads(cli("eval", str(trained[1]), "--episodes", "1", "--no-progress").strip().splitlines()[-1])
    assert quoted_keys(stated.group(1)) == list(printed)


def test_the_run_name_help_states_the_default_name(trained, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = one_line(capsys.readouterr().out.replace("│", " "))
    template = re.search(r"--run-name .*?\(default: (\{env\}\S*?\{timestamp\})", text)
    assert template, text[:2000]
    pattern = re.escape(template.group(1))
    for field, value in (("env", "CartPole-v1"), ("variant", "ppo"), ("seed", "1"), ("timestamp", r"\d{8}-\d{6}")):
        pattern = pattern.replace(re.escape("{" + field + "}"), value)
    assert re.fullmatch(pattern, trained[1].name), (template.group(1), trained[1].name)


def test_the_documented_gym_scalars_are_the_logged_ones(trained):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    stated = re.search(r"\*\*Logging\*\* \(TensorBoard, every update\): (.*?); a variant",
                       one_line(doc("docs/architecture.md")))
    assert stated
    events = EventAccumulator(str(trained[1]), size_guidance={"scalars": 0})
    events.Reload()
    assert sorted(ticked(stated.group(1))) == sorted(events.Tags()["scalars"])


HELP_GROUPS = {"train": r"`rlkit train --help` groups the flags: the run's own, (.*?);",
               "rlhf": r"`rlkit rlhf --help` has (.*?)\. A command"}


def stated_groups(command: str) -> list[str]:
    """The --help groups the guide states for ``command``, in its order (flags named beside them left out)."""
    found = re.search(HELP_GROUPS[command], one_line(GUIDE))
    assert found, f"docs/getting-started.md no longer states rlkit {command}'s --help groups"
    return [g for g in ticked(found.group(1)) if not g.startswith("--")]


def test_the_guide_names_every_preset():
    presets = re.search(r"applies named presets in order \((.*?)\) and other flags", one_line(GUIDE))
    assert presets and sorted(ticked(presets.group(1))) == sorted(PRESETS)


@pytest.mark.parametrize("command", sorted(HELP_GROUPS))
def test_the_guide_names_every_help_group_of_each_command(capsys, command):
    from tests.test_cli_help import groups

    with pytest.raises(SystemExit):
        main([command, "--help"])
    shown = [title.removesuffix(" options") for title in groups(capsys.readouterr().out) if title != "options"]
    assert stated_groups(command) == shown


def test_every_variant_is_in_the_guide_s_help_groups_of_some_command():
    named = {g for command in HELP_GROUPS for g in stated_groups(command)}
    assert {f"variants.{v.replace('_', '-')}" for v in registered()} <= named


def test_docs_list_the_tables_columns():
    text = one_line(doc("docs/sweep-outputs.md"))
    for table, columns in (("results.csv", RESULT_COLUMNS), ("runs.csv", RUN_COLUMNS)):
        stated = re.search(rf"`{re.escape(table)}` \(one row per \w+: `([^`]+)`", text)
        assert stated and [c.strip() for c in stated.group(1).split(",")] == columns, table


STEPS = {"k": 1000, "M": 1_000_000}


def recipe_counts():
    """Every count the docs state for a recipe: (where, spec file, variants or None, seeds, steps or None)."""
    for name in ("README.md", "docs/ablation.md"):
        for line in doc(name).splitlines():
            command = re.search(r"rlkit sweep (\S+\.toml).*# (\d+) variants x (\d+) seeds", line)
            if command:
                yield name, command.group(1), int(command.group(2)), int(command.group(3)), None
            row = re.match(r"\| `(experiments/[^`]+\.toml)` \| (.*) \| .* \|$", line)
            budget = re.findall(r"(\d+) seeds × (\d+)([kM])", row.group(2)) if row else []
            if budget:
                variants = re.match(r"(\d+) variants:", row.group(2))
                seeds, steps, unit = budget[-1]
                yield (name, row.group(1), int(variants.group(1)) if variants else None, int(seeds),
                       int(steps) * STEPS[unit])


def test_recipe_counts_the_docs_state_are_the_specs():
    stated = list(recipe_counts())
    assert len(stated) >= 10 and any(r[1] == "experiments/outer_ppo/cartpole.toml" and r[0] == "docs/ablation.md"
                                     and r[2] is not None for r in stated)
    for where, path, variants, seeds, steps in stated:
        spec = load_spec(str(ROOT / path))
        assert variants is None or len(spec.variants) == variants, (where, path, len(spec.variants))
        assert len({r.seed for r in spec.runs}) == seeds, (where, path)
        assert steps is None or {r.config["total_steps"] for r in spec.runs} == {steps}, (where, path)
