"""README.md is a guide that stays true: at most 12,000 bytes, and every recipe in it runs as printed
(with smoke budgets appended), with the outcome the text around it describes."""

import json
import re
import tomllib

from tests.docs.recipes import ROOT, Shell, fenced_blocks, logged, recipes

README = (ROOT / "README.md").read_text()
RECIPES = recipes(README)
SMOKE = {"rlkit train": ["--total-steps", "2048", "--eval-episodes", "2"], "rlkit eval": ["--episodes", "2"],
         "rlkit report": ["--reps", "1000"]}
"""Each command's smoke budget: appended flags override the printed ones."""


def test_readme_is_at_most_12000_bytes_and_every_code_block_is_a_recipe_or_the_set_up():
    assert len(README.encode()) <= 12_000, len(README.encode())
    assert sorted(RECIPES) == ["compare", "rlhf", "train", "variant"]
    setup, *others = fenced_blocks(README)
    assert len(others) == sum(len(blocks) for blocks in RECIPES.values())
    targets = re.findall(r"^make (\w+)", setup.text, re.M)
    assert targets == ["demo", "test"]
    assert all(re.search(rf"^{target}: ", (ROOT / "Makefile").read_text(), re.M) for target in targets)


def test_every_make_target_the_readme_names_is_in_the_makefile():
    named = set(re.findall(r"`make\s+(\w[\w-]*)", README)) | set(re.findall(r"^make (\w+)", README, re.M))
    assert {"demo", "test", "llm", "arithmetic"} <= named
    makefile = (ROOT / "Makefile").read_text()
    assert [t for t in sorted(named) if not re.search(rf"^{t}: ", makefile, re.M)] == []


def events_in(folder):
    return sorted(p for p in folder.rglob("events.out.tfevents.*"))


def test_the_train_recipe_trains_evaluates_and_logs(tmp_path):
    shell = Shell(tmp_path, SMOKE)
    shell.run(RECIPES["train"])
    trained, evaluated = (json.loads(out.strip().splitlines()[-1]) for out in shell.printed)
    named = re.search(r"--run-name (\S+)", RECIPES["train"][0].text).group(1)
    assert trained["run_dir"] == f"runs/{named}" and trained["total_steps"] == 2048
    assert (tmp_path / trained["run_dir"] / "result.json").is_file()
    assert evaluated["run_dir"] == trained["run_dir"] and evaluated["episodes"] == 2
    assert shell.tensorboard == [tmp_path / "runs"] and events_in(tmp_path / "runs")


def test_the_compare_recipe_sweeps_and_reports_what_the_readme_lists(tmp_path):
    toml, commands = RECIPES["compare"]
    spec = tomllib.loads(toml.text)
    assert len(spec["variants"]) == 2 and spec["baseline"] in spec["variants"]
    shell = Shell(tmp_path, {**SMOKE, "rlkit sweep": ["--budget", "smoke", "--out", f"sweeps/{spec['name']}"]})
    shell.run([toml, commands])
    swept = json.loads(shell.printed[0].strip().splitlines()[-1])
    assert swept["done"] == swept["total"] == len(spec["variants"]) * spec["smoke"]["seeds"] and not swept["failed"]
    report = tmp_path / "sweeps" / spec["name"] / "report"
    text = (report / "report.md").read_text()
    listed = re.search(r"The report\s+holds:\n\n(.*?)\n\n", README, re.S).group(1)
    for stated, shown in (("per-env", "## Per environment"), ("IQM", "IQM [95% CI]"),
                          ("P(variant > baseline)", "P(> baseline)"), ("rank tests", "## Rank tests"),
                          ("fewer than 5 runs", "**Few runs: the intervals are not reliable.**")):
        assert stated in " ".join(listed.split()) and shown in text, stated
    for stated, figure in (("learning curves against steps", "curves_steps.png"),
                           ("wall-clock time", "curves_wallclock.png"), ("per-env intervals", "per_env.png"),
                           ("probability of\n  improvement", "improvement.png"), ("performance profiles", "profiles.png")):
        assert " ".join(stated.split()) in " ".join(listed.split()) and (report / figure).is_file(), figure
    assert "`summary.json`" in listed and json.loads((report / "summary.json").read_text())


def test_the_variant_recipe_is_a_flag_a_help_group_and_a_run(tmp_path):
    listing, commands = RECIPES["variant"]
    assert listing.file_name() == "myvariant.py"
    shell = Shell(tmp_path, SMOKE)
    shell.run([listing, commands])
    helped, trained = shell.printed
    assert "variants.damp" in helped and "--damp-scale" in helped
    result = json.loads(trained.strip().splitlines()[-1])
    stated = re.search(r"The run is named `([^`]+)\.\.\.`, logs `([^`]+)`", README)
    assert result["variant"] == "damp0.5" and result["run_dir"].startswith("runs/" + stated.group(1))
    assert stated.group(2) in logged(tmp_path / result["run_dir"]).Tags()["scalars"]


def test_the_rlhf_recipe_is_the_one_docs_rlhf_runs():
    """tests/rlhf/test_rlhf_docs.py runs docs/rlhf.md's smallest run as written; the README shows
    the same block, so it runs too (without a second RLHF run's minutes in the suite)."""
    from tests.rlhf.test_rlhf_docs import smallest_run_block

    (block,) = RECIPES["rlhf"]
    assert block.text == smallest_run_block()

