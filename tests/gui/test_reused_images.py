"""Images reused from sentence to sentence: a heatmap or a grid thumbnail given as many cells as before keeps
its rectangle and limits (set only when the shape changes) but shows the new colours; given another shape,
its rectangle follows. Label sizes are measured once per string and font, and stay right."""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage

from core.attention_view import attention_scale, head_maxima
from gui.fonts import ui_font
from gui.head_grid import HeadGrid
from gui.heatmap import Heatmap
from gui.static_texts import static_texts

A = "The cat sat on the mat."
B = "The mat sat on the cat."


def solid(rows: int, cols: int, rgba: tuple[int, int, int, int]) -> np.ndarray:  # -> [rows, cols, 4] uint8
    return np.tile(np.array(rgba, np.uint8), (rows, cols, 1))


def shown_colour(heatmap: Heatmap) -> tuple[int, int, int, int]:
    """The colour of the image's first pixel as Qt will draw it."""
    image = heatmap.image
    image.render()
    pixel = image.qimage.convertToFormat(QImage.Format.Format_RGBA8888).pixelColor(0, 0)
    return pixel.red(), pixel.green(), pixel.blue(), pixel.alpha()


def test_a_heatmap_of_the_same_shape_shows_the_new_colours_and_keeps_its_rect(qtbot):
    heatmap = Heatmap("key", "query")
    heatmap.set_rgba(solid(3, 5, (255, 0, 0, 255)))
    heatmap.set_rgba(solid(3, 5, (0, 0, 255, 255)))
    assert shown_colour(heatmap) == (0, 0, 255, 255)
    assert heatmap.image.mapRectToParent(heatmap.image.boundingRect()) == QRectF(0, 0, 5, 3)
    assert heatmap.image.qimage.format() == QImage.Format.Format_ARGB32_Premultiplied


def test_a_heatmap_of_another_shape_gets_its_rect_and_limits(qtbot):
    heatmap = Heatmap("key", "query")
    heatmap.set_rgba(solid(3, 5, (255, 0, 0, 255)))
    heatmap.set_rgba(solid(7, 2, (0, 255, 0, 255)))
    assert shown_colour(heatmap) == (0, 255, 0, 255)
    assert heatmap.image.mapRectToParent(heatmap.image.boundingRect()) == QRectF(0, 0, 2, 7)
    assert heatmap.vb.state["limits"]["xLimits"] == [0, 2] and heatmap.vb.state["limits"]["yLimits"] == [0, 7]


def test_grid_thumbnails_follow_each_trace_and_stay_in_their_cells(qtbot, analysed):
    grid = HeadGrid()
    qtbot.addWidget(grid)
    first, second, longer = analysed(A), analysed(B), analysed(A + " " + A)
    for trace in (first, second, longer):
        scale = attention_scale(head_maxima(trace), "shared")
        grid.show_heads(trace, scale)
        expected = grid._colours(trace, scale)   # [L, H, P, P, 4]
        for layer, row in enumerate(grid.images):
            for head, image in enumerate(row):
                assert np.array_equal(image.image, expected[layer, head])
                x, y = grid.origin(layer, head)
                assert image.mapRectToParent(image.boundingRect()) == QRectF(x, y, 1, 1)
    assert first.n_tokens == second.n_tokens != longer.n_tokens   # the same shape reused, then another


def test_label_sizes_are_the_laid_out_sizes(qtbot):
    texts = static_texts(ui_font(8.5))
    for label in ("the", "␣cat", "猫", "the"):
        laid_out = texts(label).size()
        assert texts.size(label) == (laid_out.width(), laid_out.height())
        assert texts.width(label) == laid_out.width()
