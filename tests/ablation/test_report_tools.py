"""``rlkit report``'s tools: a first argument naming a tool runs it, any other is a sweep folder as
before, ``rlkit report -- NAME`` reports a sweep folder named like a tool; every flag of every tool
has help text, and bad input is one line with exit 2."""

import re

import pytest

from rlkit.cli import main
from rlkit.cli_report import TOOLS
from tests.ablation.test_hostile_sweeps import fake_sweep


@pytest.fixture
def sweep_named_tags(tmp_path, monkeypatch):
    """A finished sweep (variants a and b, five seeds) in the folder ``tags`` of the current folder."""
    finals = {(v, "CartPole-v1", s): [10.0 * s, 40.0 * k + 9.0 * s] for k, v in enumerate("ab") for s in range(1, 6)}
    out = fake_sweep(tmp_path, finals)
    out.rename(tmp_path / "tags")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "tags"


def test_a_sweep_folder_named_like_a_tool_is_reported_after_two_dashes(sweep_named_tags, capsys):
    assert main(["report", "tags"]) == 2  # the tool, which wants --tags: no report
    err = capsys.readouterr().err
    assert err == "rlkit: error: the following arguments are required: sweep_dir, --tags (see rlkit report tags --help)\n"
    assert not (sweep_named_tags / "report").exists()
    assert main(["report", "--", "tags", "--baseline", "a", "--reps", "200"]) == 0
    assert (sweep_named_tags / "report" / "summary.json").is_file()


def test_any_other_first_argument_is_still_a_sweep_folder(tmp_path, capsys):
    missing = tmp_path / "no-sweep-here"
    assert main(["report", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlkit: error: ") and str(missing) in err and err.count("\n") == 1


def help_entries(text: str) -> dict[str, str]:
    """Each argument of an argparse help text (positional and options) -> its help text."""
    entries: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        entry = re.match(r"^  (\S(?:.*?\S)?)(?:\s{2,}(\S.*))?$", line)
        if entry:  # an argument: its help after two or more spaces, or on the lines below it
            name = entry.group(1)
            entries[name] = entry.group(2) or ""
        elif name and line.startswith("   ") and line.strip():
            entries[name] = (entries[name] + " " + line.strip()).strip()
        else:
            name = None
    return entries


@pytest.mark.parametrize("tool", list(TOOLS))
def test_every_flag_of_every_tool_has_help_text(tool, capsys):
    with pytest.raises(SystemExit) as done:
        main(["report", tool, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: rlkit report {tool} ")
    entries = help_entries(text)
    assert len(entries) >= 3 and "-h, --help" in entries  # the tool's own arguments, and --help
    assert [name for name, help_text in entries.items() if not help_text] == []


def test_the_reports_help_names_the_tools_and_the_two_dashes_and_every_flag_has_help_text(capsys):
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    out = capsys.readouterr().out
    text = " ".join(out.split())
    assert all(tool in text for tool in TOOLS) and "rlkit report -- NAME" in text
    entries = help_entries(out)
    assert {"sweep_dir", "--metric {final,auc,train100}", "--normalize {none,minmax,best-mean}"} <= set(entries)
    assert [name for name, help_text in entries.items() if not help_text] == []


@pytest.mark.parametrize("tool, args, message", [
    ("tags", ["{tmp}", "--tags", "x", "--k", "0"], "--k must be at least 1, got 0"),
    ("tags", ["{tmp}", "--tags", "x"], "is not a sweep directory (no manifest.json)"),
    ("staleness", ["{tmp}"], "is not a sweep directory (no manifest.json)"),
    ("scalars", ["{tmp}"], "no TensorBoard event file"),
    ("scalars", ["{tmp}", "--block", "-1"], "--block 0 or more"),
    ("walltime", ["{tmp}"], "is not a readable sweep folder"),
    ("staleness", ["{tmp}", "--write", "{tmp}/no/such/folder/notes.md"], "cannot write there"),
])
def test_bad_input_to_a_tool_is_one_line_with_exit_2(tool, args, message, tmp_path, capsys):
    assert main(["report", tool, *[a.format(tmp=tmp_path) for a in args]]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("rlkit: error: ") and message in captured.err
    assert captured.err.count("\n") == 1 and not captured.out
