"""The report's interval figures show every point estimate, also where its interval has zero width
or lies on the axis edge."""

import numpy as np
import pytest

from rlkit.ablation import figures


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
    colour = figures.colours(["ppo", "outer", "other"])
    figures.improvement({"outer": [point, point, point], "other": [0.6, 0.45, 0.8]}, "ppo", colour,
                        tmp_path / "improvement.png")
    (fig,) = drawn
    ax = fig.axes[0]
    low, high = ax.get_xlim()
    assert low < point < high  # not on the axis edge
    near = pixels_near(fig, ax, point, 0)
    assert np.abs(near - np.array(colour["outer"][:3])).max(axis=1).min() < 0.05, "no marker in the variant's colour"
    assert any("degenerate" in t.get_text() for t in ax.texts)
    assert not any("degenerate" in t.get_text() and t.xy[1] == 1 for t in ax.texts)  # the real interval is not
