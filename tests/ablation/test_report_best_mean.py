"""``rlkit report --normalize best-mean``: the PPO paper's Table 1 scale, a random policy 0 and the
best variant's mean score 1 on each env, beside min-max's best run or the spec's reference."""

import pytest

from rlkit.ablation.report import write_report
from rlkit.cli import main
from rlkit.errors import ConfigError
from tests.ablation.test_hostile_sweeps import fake_sweep, strict_json

# final scores: a's mean 200, b's mean 400; the spec (fake_sweep) gives random 0, reference 500
FINALS = {("a", "CartPole-v1", 1): [100.0], ("a", "CartPole-v1", 2): [200.0], ("a", "CartPole-v1", 3): [300.0],
          ("b", "CartPole-v1", 1): [350.0], ("b", "CartPole-v1", 2): [400.0], ("b", "CartPole-v1", 3): [450.0]}


def aggregate_means(summary):
    return {v: a["mean"][0] for v, a in summary["aggregate"].items()}


def test_best_mean_puts_the_best_variants_mean_at_one_and_keeps_the_specs_random(tmp_path):
    sweep = fake_sweep(tmp_path, FINALS)
    summary = strict_json(write_report(str(sweep), "a", normalize="best-mean", reps=100)["summary"])
    ref = summary["references"]["CartPole-v1"]
    assert (ref["random"], ref["reference"], ref["usable"]) == (0.0, 400.0, True)
    assert ref["source"] == "spec's random; the best variant's mean (b)" and summary["normalize"] == "best-mean"
    assert aggregate_means(summary) == pytest.approx({"a": 0.5, "b": 1.0})
    assert "random policy 0, the best variant's mean 1" in (sweep / "report" / "report.md").read_text()


def test_minmax_keeps_the_specs_reference_on_the_same_runs(tmp_path):
    sweep = fake_sweep(tmp_path, FINALS)
    summary = strict_json(write_report(str(sweep), "a", reps=100)["summary"])
    assert summary["references"]["CartPole-v1"]["reference"] == 500.0
    assert aggregate_means(summary) == pytest.approx({"a": 0.4, "b": 0.8})
    assert "min-max: random policy 0, reference 1" in (sweep / "report" / "report.md").read_text()


def test_best_mean_without_spec_scores_measures_the_random_policy(tmp_path):
    sweep = fake_sweep(tmp_path, FINALS, reference=False)
    ref = strict_json(write_report(str(sweep), "a", normalize="best-mean", reps=100)["summary"])["references"]
    assert ref["CartPole-v1"]["source"] == "measured: random policy; the best variant's mean (b)"
    assert 5.0 < ref["CartPole-v1"]["random"] < 100.0 and ref["CartPole-v1"]["reference"] == 400.0


def test_an_env_where_no_variants_mean_beats_random_is_left_out(tmp_path):
    finals = {("a", "CartPole-v1", 1): [-5.0], ("a", "CartPole-v1", 2): [3.0], ("b", "CartPole-v1", 1): [-1.0],
              ("b", "CartPole-v1", 2): [-2.0]}  # a's best run beats the spec's random 0, no mean does
    summary = strict_json(write_report(str(fake_sweep(tmp_path, finals)), "a", normalize="best-mean",
                                       reps=100)["summary"])
    ref = summary["references"]["CartPole-v1"]
    assert not ref["usable"] and ref["source"] == "not normalized: no variant's mean beats the random policy"
    assert "aggregate" not in summary
    assert summary["envs_left_out"] == {"CartPole-v1": "no variant's mean beats the random policy (no reference to "
                                                       "normalize by)"}


def test_an_unknown_normalization_is_one_line(tmp_path, capsys):
    sweep = fake_sweep(tmp_path, FINALS)
    with pytest.raises(ConfigError, match="--normalize must be one of minmax, best-mean, none, got 'best'"):
        write_report(str(sweep), "a", normalize="best", reps=100)
    assert main(["report", str(sweep), "--normalize", "best"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rlkit: error: argument --normalize: invalid choice: 'best'")


def test_on_a_partial_sweep_the_one_is_the_best_mean_over_the_runs_aggregated(tmp_path):
    """b's seed 3 has no Acrobot run: the aggregate leaves its CartPole run out (rliable needs a full
    matrix), so the 1 is b's mean over the runs aggregated, and the report names the run left out."""
    envs = ("CartPole-v1", "Acrobot-v1")
    finals = {("a", e, s): [100.0 * s] for e in envs for s in (1, 2, 3)}
    finals.update({("b", "CartPole-v1", s): [v] for s, v in ((1, 400.0), (2, 500.0), (3, 100.0))})
    finals.update({("b", "Acrobot-v1", s): [v] for s, v in ((1, 400.0), (2, 500.0))})
    sweep = fake_sweep(tmp_path, finals, envs=envs)
    summary = strict_json(write_report(str(sweep), "a", normalize="best-mean", reps=100)["summary"])
    assert summary["references"]["CartPole-v1"]["reference"] == 450.0 and summary["seeds_aggregated"]["b"] == 2
    assert aggregate_means(summary)["b"] == pytest.approx(1.0)
    assert summary["runs_left_out"] == ["b / CartPole-v1 / seed 3"]
    assert "Runs left out of the aggregate (their seed did not finish on every env aggregated): b / CartPole-v1 / " \
           "seed 3." in (sweep / "report" / "report.md").read_text()


@pytest.mark.parametrize("normalize", ["best-mean", "minmax"])
def test_a_variant_without_a_finite_score_is_left_out_of_the_aggregate_not_a_crash(tmp_path, normalize):
    """c's every run scores NaN (as an SB3 reference does under train100): the aggregate is a's and
    b's, c's runs are named; c as the baseline is refused in one line."""
    finals = {**FINALS, **{("c", "CartPole-v1", s): [float("nan")] for s in (1, 2, 3)}}
    sweep = fake_sweep(tmp_path, finals)
    paths = write_report(str(sweep), "a", normalize=normalize, reps=100)
    summary = strict_json(paths["summary"])
    assert set(summary["aggregate"]) == {"a", "b"} and summary["envs_aggregated"] == ["CartPole-v1"]
    assert {(r["variant"], r["seed"]) for r in summary["non_finite"]} == {("c", 1), ("c", 2), ("c", 3)}
    assert "Left out of every statistic (final score NaN or inf): c / CartPole-v1 / seed 1" in \
        open(paths["report"]).read()
    with pytest.raises(ConfigError, match=r"^--baseline 'c' has no run with a finite final score; choose another "
                                          r"with --baseline: a, b$"):
        write_report(str(sweep), "c", normalize=normalize, reps=100, out_dir=str(tmp_path / "other"))
    assert not (tmp_path / "other").exists()
