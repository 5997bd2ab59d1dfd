"""``rlkit report --variants``: the baseline and the chosen variants in the figures and tables, each
with the statistics of the full report; an unknown name is refused in one line."""

import json

import pytest

from rlkit.ablation import figures
from rlkit.ablation.selection import split_variants
from rlkit.cli import main
from tests.ablation.test_hostile_sweeps import fake_sweep

ENVS = ("CartPole-v1", "Acrobot-v1")


@pytest.fixture
def sweep(tmp_path):
    """Four variants (a the baseline) on two envs, five seeds, three evaluations each."""
    finals = {(v, e, s): [10.0 * s, 50.0 * k + 7.0 * s + (3.0 if e == "Acrobot-v1" else 0.0), 60.0 * k + 11.0 * s]
              for k, v in enumerate("abcd") for e in ENVS for s in range(1, 6)}
    return fake_sweep(tmp_path, finals, envs=ENVS)


def legends(monkeypatch):
    """The labels of each figure's legends (figure-level and per axes), by the file it is saved to."""
    seen, save = {}, figures.save

    def keep(fig, path):
        boxes = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
        seen[path.name] = [t.get_text().split(" (")[0] for box in boxes for t in box.get_texts()]
        save(fig, path)
    monkeypatch.setattr(figures, "save", keep)
    monkeypatch.setattr("rlkit.ablation.curves.save", keep)
    return seen


def test_the_chosen_variants_keep_the_full_reports_statistics(sweep, tmp_path, monkeypatch):
    assert main(["report", str(sweep), "--baseline", "a", "--reps", "400"]) == 0
    full = json.loads((sweep / "report" / "summary.json").read_text())
    full_text = (sweep / "report" / "report.md").read_text()
    shown = legends(monkeypatch)
    sub = tmp_path / "sub"
    assert main(["report", str(sweep), "--baseline", "a", "--reps", "400", "--variants", "d,c", "--out", str(sub)]) == 0
    part = json.loads((sub / "summary.json").read_text())
    assert part["variants"] == ["a", "c", "d"] and part["variants_of_sweep"] == list("abcd")
    assert part["per_env"] == [r for r in full["per_env"] if r["variant"] in "acd"]
    assert part["aggregate"] == {v: full["aggregate"][v] for v in "acd"}
    assert part["improvement"] == {v: full["improvement"][v] for v in "cd"}
    assert part["references"] == full["references"] and part["envs_aggregated"] == full["envs_aggregated"]
    assert part["rank_tests"]["per_env"] == [r for r in full["rank_tests"]["per_env"] if r["variant"] in "cd"]
    assert part["runs"] == {"done": 30}
    text = (sub / "report.md").read_text()
    assert "| CartPole-v1 | c |" in text and "| CartPole-v1 | b |" not in text and "| b |" not in text
    assert "3 of the sweep's 4 variants" in text
    for name in ("curves_steps.png", "curves_wallclock.png", "profiles.png"):
        assert shown[name] == ["a", "c", "d"], name
    assert (sweep / "report" / "report.md").read_text() == full_text  # the full report stays as it was


def test_all_variants_by_default_baseline_first(sweep, monkeypatch):
    shown = legends(monkeypatch)
    assert main(["report", str(sweep), "--baseline", "c", "--reps", "200"]) == 0
    assert shown["curves_steps.png"] == ["c", "a", "b", "d"]
    assert json.loads((sweep / "report" / "summary.json").read_text())["variants"] == ["c", "a", "b", "d"]


@pytest.mark.parametrize("chosen, message", [
    ("c,nope", "--variants: unknown variant(s) nope; the sweep's variants: a, b, c, d"),
    ("c,,d", "--variants must name variants separated by commas"),
])
def test_unknown_variants_are_refused_in_one_line(sweep, tmp_path, capsys, chosen, message):
    out = tmp_path / "refused"
    assert main(["report", str(sweep), "--baseline", "a", "--variants", chosen, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlkit: error: ") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_a_grid_variants_commas_stay_in_its_name():
    assert split_variants("outer[outer_lr=1.5,outer_momentum=0.9],ppo, hp3o") == [
        "outer[outer_lr=1.5,outer_momentum=0.9]", "ppo", "hp3o"]
