"""The report's figures: every point estimate shown, also where its interval has zero width or lies
on the axis edge; every variant drawn its own way, one legend per figure, many envs in rows."""

import matplotlib.colors
import numpy as np
import pytest

import pandas as pd

from rlkit.ablation import curves, figures

OUTER = ["ppo", "sigma0.5", "sigma0.8", "sigma1.2", "sigma1.5", "sigma2.0", "mu0.5", "mu0.9", "mu0.5-nesterov",
         "mu0.9-nesterov", "biased-alpha0.5"]
"""The Outer-PPO MuJoCo sweep's eleven variants."""


@pytest.fixture
def drawn(monkeypatch):
    """The figures the report closes after saving, kept to look at."""
    kept, close = [], figures.plt.close
    monkeypatch.setattr(figures.plt, "close", kept.append)
    yield kept
    for fig in kept:
        close(fig)


def pixels_near(fig, ax, x, y, radius=3):
    """RGB values ``[k, 3]`` (0..1) of the rendered figure within ``radius`` pixels of data point (x, y)."""
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[..., :3] / 255.0
    px, py = ax.transData.transform((x, y))
    row, col = int(round(image.shape[0] - py)), int(round(px))
    return image[max(0, row - radius):row + radius + 1, max(0, col - radius):col + radius + 1].reshape(-1, 3)


@pytest.mark.parametrize("point", [1.0, 0.0, 0.7])
def test_a_zero_width_interval_still_shows_its_estimate(drawn, tmp_path, point):
    """P(> baseline) = 1.000 [1.000, 1.000] (3 runs against 3 that never overlap): the estimate is
    drawn in the variant's colour, inside the axes, and the interval is labelled degenerate."""
    look = figures.looks(["ppo", "outer", "other"], "ppo")
    figures.improvement({"outer": [point, point, point], "other": [0.6, 0.45, 0.8]}, "ppo", look,
                        tmp_path / "improvement.png")
    (fig,) = drawn
    ax = fig.axes[0]
    low, high = ax.get_xlim()
    assert low < point < high  # not on the axis edge
    near = pixels_near(fig, ax, point, 0)
    rgb = np.array(matplotlib.colors.to_rgb(look["outer"].colour))
    assert np.abs(near - rgb).max(axis=1).min() < 0.05, "no marker in the variant's colour"
    assert any("degenerate" in t.get_text() for t in ax.texts)
    assert not any("degenerate" in t.get_text() and t.xy[1] == 1 for t in ax.texts)  # the real interval is not


def lab(colour):
    """CIE L*a*b* of an sRGB colour (L*: 0 black .. 100 white)."""
    rgb = np.array(matplotlib.colors.to_rgb(colour))
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    t = xyz / [0.95047, 1.0, 1.08883]
    f = np.where(t > 216 / 24389, np.cbrt(t), (24389 / 27 * t + 16) / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


@pytest.mark.parametrize("variants, references", [
    (OUTER, []),
    (["ppo", "hp3o", "hp3o+", "hp3o-buffer10", "hp3o-k3", "sb3:ppo", "sb3-contrib:trpo"], ["sb3:ppo", "sb3-contrib:trpo"]),
    (["ppo"] + [f"v{i}" for i in range(18)] + ["sb3:ppo"], ["sb3:ppo"]),
])
def test_every_variant_has_its_own_visible_colour(variants, references):
    """No two variants share a colour; every line shows on white (no pale tints); two variants
    drawn with the same line style differ clearly in colour (CIE76 distance of 20 or more: not a
    light and a dark shade of one colour); the baseline is black and widest; reference
    implementations are dash-dotted."""
    look = figures.looks(variants, "ppo", references)
    assert list(look) == variants
    assert len({v.colour for v in look.values()}) == len(variants)
    assert all(lab(v.colour)[0] < 76 for v in look.values()), {n: round(lab(v.colour)[0]) for n, v in look.items()}
    for a in variants:
        for b in variants[variants.index(a) + 1:]:
            if look[a].line == look[b].line:
                assert np.linalg.norm(lab(look[a].colour) - lab(look[b].colour)) >= 20, (a, b)
    assert look["ppo"].colour == "#000000" and look["ppo"].width > max(v.width for n, v in look.items() if n != "ppo")
    assert all(look[r].line == "-." for r in references)
    assert all(look[v].line != "-." for v in variants if v not in references)


def fake_results(variants, envs, seeds=3):
    """Evaluations every 100 steps to 1000 of every variant, env and seed (returns grow with the
    variant's index)."""
    rows = [{"variant": v, "env": e, "seed": s, "step": step, "wall_s": step / 100.0,
             "eval_return_mean": (i + 1) * step / 10.0 + s}
            for i, v in enumerate(variants) for e in envs for s in range(seeds) for step in range(100, 1100, 100)]
    return pd.DataFrame(rows)


def test_learning_curves_wrap_envs_into_rows_under_one_legend(drawn, tmp_path):
    """Eleven variants on five envs: two rows of panels, every variant's line in its own colour and
    style in each, one legend for the figure (below the panels, every variant once), none per panel."""
    envs = [f"Env{i}-v0" for i in range(5)]
    look = figures.looks(OUTER, "ppo")
    computed = curves.compute(fake_results(OUTER, envs), "step", OUTER, reps=200)
    curves.overlay(computed, "step", OUTER, look, tmp_path / "curves.png")
    (fig,) = drawn
    assert len(fig.axes) == 5 and len({round(ax.get_position().y0, 3) for ax in fig.axes}) == 2
    for ax in fig.axes:
        drawn_as = {(matplotlib.colors.to_hex(line.get_color()), line.get_linestyle()) for line in ax.get_lines()}
        assert len(drawn_as) == len(OUTER) == len(ax.get_lines())
        assert ax.get_legend() is None
    (legend,) = fig.legends
    assert [t.get_text().split(" (")[0] for t in legend.get_texts()] == OUTER
    fig.canvas.draw()
    bottom = min(ax.get_tightbbox().y0 for ax in fig.axes)
    assert legend.get_window_extent().y1 <= bottom + 1  # under the panels, not over a curve


def test_many_variants_are_also_drawn_each_against_the_baseline(drawn, tmp_path):
    """Small multiples: a row per variant (the baseline's curve and its own in each panel), a column per env."""
    envs = ["A-v0", "B-v0"]
    look = figures.looks(OUTER, "ppo")
    computed = curves.compute(fake_results(OUTER, envs), "step", OUTER, reps=200)
    curves.against_baseline(computed, "step", "ppo", OUTER, look, tmp_path / "vs.png")
    (fig,) = drawn
    assert len(fig.axes) == (len(OUTER) - 1) * 2
    for k, ax in enumerate(fig.axes):
        colours = [matplotlib.colors.to_hex(line.get_color()) for line in ax.get_lines()]
        assert colours == ["#000000", look[OUTER[1 + k // 2]].colour]
