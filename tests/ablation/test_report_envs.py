"""``rlkit report --envs``: a report computed over the chosen environments' runs alone equals the
report of a sweep that holds only those environments; bad names are refused in one line."""

import json

import pytest

from rlkit.cli import main
from tests.ablation.test_hostile_sweeps import fake_sweep

ENVS = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1")
STATS = ("per_env", "aggregate", "improvement", "references", "envs_aggregated", "seeds_aggregated", "rank_tests",
         "runs")


def finals(envs):
    """Three variants (a the baseline), five seeds, returns that order the variants differently per env."""
    return {(v, e, s): [10.0 * s, 40.0 * ((k + i) % 3) + 9.0 * s + 5.0 * i]
            for k, v in enumerate("abc") for i, e in enumerate(envs) for s in range(1, 6)}


def sweep_in(tmp_path, name, envs, runs_on):
    base = tmp_path / name
    base.mkdir()
    return fake_sweep(base, finals(runs_on), envs=envs)


@pytest.mark.parametrize("normalize", ["minmax", "best-mean"])
def test_a_report_on_some_envs_equals_a_sweep_of_those_envs_alone(tmp_path, normalize):
    full = sweep_in(tmp_path, "full", ENVS, ENVS)
    alone = sweep_in(tmp_path, "alone", ENVS[:2], ENVS[:2])
    flags = ["--baseline", "a", "--reps", "300", "--normalize", normalize]
    assert main(["report", str(full), *flags, "--envs", "Acrobot-v1, CartPole-v1", "--out", str(tmp_path / "some")]) == 0
    assert main(["report", str(alone), *flags]) == 0
    assert main(["report", str(full), *flags]) == 0
    some, two, every = (json.loads((d / "summary.json").read_text())
                        for d in (tmp_path / "some", alone / "report", full / "report"))
    for key in STATS:
        assert some[key] == two[key], key
    assert some["envs_of_sweep"] == list(ENVS) and "envs_of_sweep" not in two
    assert every["aggregate"] != some["aggregate"] and len(every["per_env"]) == 9  # the full report is unchanged
    text = (tmp_path / "some" / "report.md").read_text()
    assert "Environments: CartPole-v1, Acrobot-v1 only (`--envs`; the sweep's: CartPole-v1, Acrobot-v1, Pendulum-v1)" in text
    assert "| Pendulum-v1 |" not in text and "| Pendulum-v1 |" in (full / "report" / "report.md").read_text()
    assert "CIs (rliable, 300 resamples)" in text


def test_with_some_variants_the_statistics_are_named_as_those_of_the_chosen_envs(tmp_path):
    full = sweep_in(tmp_path, "full", ENVS, ENVS)
    out = tmp_path / "both"
    assert main(["report", str(full), "--baseline", "a", "--reps", "200", "--variants", "c", "--envs", "Acrobot-v1",
                 "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "Every statistic is that of the report of every variant on the environments below:" in text
    assert "Environments: Acrobot-v1 only" in text


@pytest.mark.parametrize("chosen, message", [
    ("CartPole-v1,Nope-v0", "--envs: unknown environment(s) Nope-v0; the sweep's environments: CartPole-v1, "
                            "Acrobot-v1, Pendulum-v1"),
    ("CartPole-v1,,Acrobot-v1", "--envs must name environments separated by commas"),
    ("Pendulum-v1", "--envs: Pendulum-v1 has no finished runs; environments with finished runs: CartPole-v1, "
                    "Acrobot-v1"),
])
def test_bad_env_names_are_refused_in_one_line(tmp_path, capsys, chosen, message):
    sweep = sweep_in(tmp_path, "s", ENVS, ENVS[:2])
    out = tmp_path / "refused"
    assert main(["report", str(sweep), "--baseline", "a", "--envs", chosen, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlkit: error: ") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_naming_every_env_says_so_and_equals_the_full_report(tmp_path):
    full = sweep_in(tmp_path, "full", ENVS, ENVS)
    flags = ["--baseline", "a", "--reps", "200"]
    assert main(["report", str(full), *flags, "--envs", ",".join(reversed(ENVS)), "--out", str(tmp_path / "all")]) == 0
    assert main(["report", str(full), *flags]) == 0
    every, named = (json.loads((d / "summary.json").read_text()) for d in (full / "report", tmp_path / "all"))
    for key in STATS:
        assert named[key] == every[key], key
    text = (tmp_path / "all" / "report.md").read_text()
    assert "Environments: every one of the sweep's (`--envs` names them all)." in text and " only (`--envs`" not in text


@pytest.mark.parametrize("argv, message", [
    (["--envs", "CartPole-v1", "Acrobot-v1"], "unrecognized arguments: Acrobot-v1 (--variants and --envs take names "
                                              "separated by commas, no spaces)"),
    (["--envs", "CartPole-v1", "--envs", "Acrobot-v1"], "--envs given twice: name every choice in one, separated by "
                                                         "commas"),
    (["--variants", "b", "--variants", "c"], "--variants given twice"),
    (["--nope", "x"], "unrecognized arguments: --nope x (see rlkit report --help)"),
])
def test_a_list_split_by_a_space_or_given_twice_is_refused_in_one_line(tmp_path, capsys, argv, message):
    sweep = sweep_in(tmp_path, "s", ENVS, ENVS)
    out = tmp_path / "refused"
    assert main(["report", str(sweep), "--baseline", "a", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlkit: error: ") and message in err and err.count("\n") == 1
    assert not out.exists()
    if argv[0] == "--nope":
        assert "commas" not in err  # the hint is for a list's second name, not an unknown flag
