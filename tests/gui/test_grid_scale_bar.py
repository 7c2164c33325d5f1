"""The attention grid's exported page has a colour bar with its scale; the screen keeps the space for thumbnails."""
from __future__ import annotations

import pytest

from gui import figure_pages as pages
from gui.panels.attention_panel import AttentionPanel


def bar_labels(grid) -> list[str]:
    return [label for _, label in grid._scale_bar.getAxis("bottom")._tickLevels[0]]


@pytest.mark.parametrize("mode, ends", [("shared", None), ("fixed", ["0", "0.5", "1"]),
                                        ("head", ["0", "each head's largest weight"])])
def test_the_grid_page_has_a_colour_bar_with_its_scale(show, analysed, mode, ends):
    panel = show(AttentionPanel(), 1200, 800)
    panel.set_trace(analysed("The cat sat on the mat. The cat sat on the"))
    panel.scale_combo.setCurrentIndex(panel.scale_combo.findData(mode))
    panel.flush()
    grid = panel.grid
    figure = next(f for f in panel.figures() if f.name == "attention_grid")
    with pages.on_page(figure):
        assert grid._scale_bar in grid.ci.items and grid._scale_bar.isVisible()
        top = float(grid.scale.tops.max())
        expected = ends or ["0", f"{top / 2:.2f}".rstrip("0").rstrip("."), f"{top:.2f}".rstrip("0").rstrip(".")]
        assert bar_labels(grid) == expected
        bar_top = grid._scale_bar.sceneBoundingRect().top()
        assert all(image.sceneBoundingRect().bottom() <= bar_top for row in grid.images for image in row)
    assert grid._scale_bar not in grid.ci.items   # back on screen: no bar
