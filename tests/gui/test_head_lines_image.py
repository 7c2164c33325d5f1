"""The head view's lines image is widened from its 4-pixel columns in NumPy (widen_columns): the same pixels,
to a level, as Qt's smooth scaling that made it before, in the byte order of a premultiplied ARGB32 image."""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from gui.head_lines import ARGB32_BYTES, LINE_COLUMN_WIDTH, widen_columns


def test_widened_columns_match_a_smooth_scaling_in_argb32(qtbot):
    rng = np.random.default_rng(0)
    alpha = rng.random((37, 11, 1)).astype(np.float32)
    rgba = np.concatenate([alpha * 0.2, alpha * 0.5, alpha * 0.9, alpha], axis=2)   # premultiplied
    narrow = (rgba * 255 + 0.5).astype(np.uint8, order="C")
    columns = QImage(narrow.data, 11, 37, 11 * 4, QImage.Format.Format_RGBA8888_Premultiplied)
    qt = columns.scaled(11 * LINE_COLUMN_WIDTH, 37, Qt.AspectRatioMode.IgnoreAspectRatio,
                        Qt.TransformationMode.SmoothTransformation).convertToFormat(
                            QImage.Format.Format_ARGB32_Premultiplied)
    expected = np.frombuffer(qt.constBits(), np.uint8).reshape(37, qt.bytesPerLine() // 4, 4)[:, :11 * LINE_COLUMN_WIDTH]
    widened = widen_columns(rgba[..., ARGB32_BYTES] * 255 + 0.5, LINE_COLUMN_WIDTH).astype(np.uint8)
    assert widened.shape == expected.shape
    assert np.abs(widened.astype(int) - expected.astype(int)).max() <= 1


def _lines_view(tokens: int = 64):
    from PySide6.QtGui import QColor

    from gui.head_lines import HeadLinesView

    rng = np.random.default_rng(1)
    weights = np.tril(rng.random((1, tokens, tokens))) ** 4
    weights /= weights.sum(axis=2, keepdims=True)
    view = HeadLinesView()
    view.set_lines([f"t{i}" for i in range(tokens)], weights, [QColor(40, 90, 200)], ["head 0"], "layer 0 · head 0")
    return view


def _lines_in_scroll_area(qtbot):
    from PySide6.QtWidgets import QScrollArea

    view = _lines_view()
    area = QScrollArea()
    area.setWidget(view)
    area.setWidgetResizable(True)
    area.resize(420, 300)
    qtbot.addWidget(area)
    area.show()
    qtbot.waitExposed(area)
    return area, view


def _on_screen(area) -> np.ndarray:
    return _pixels(area.viewport().grab().toImage())


def _pixels(image: QImage) -> np.ndarray:  # -> [rows, columns, 4], a copy (the image's memory goes with it)
    image = image.convertToFormat(QImage.Format.Format_RGB32)
    return np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine() // 4, 4).copy()


def _cached_rows(view) -> tuple[int, int]:
    (_, band), _ = view._line_images[("full", 1.0)]
    return band


def test_a_new_picture_rasterises_the_rows_on_screen_and_scrolling_shows_every_line(qtbot):
    """Drawn for a new sentence, the lines image covers what is on screen, not the whole tall view; scrolled
    past it, the view shows exactly the lines a full render of the view has there."""
    area, view = _lines_in_scroll_area(qtbot)
    assert view.height() > 3 * area.viewport().height()   # tall enough for the band to matter
    _on_screen(area)
    top, bottom = _cached_rows(view)
    assert top == 0 and bottom <= area.viewport().height() + 2
    reference = _lines_view()   # the same lines rendered off screen, every row (the view's own cache untouched)
    reference.resize(view.size())
    full_pixels = _pixels(reference.grab().toImage())
    for scroll in (area.viewport().height() // 2, view.height() // 2, view.height()):
        area.verticalScrollBar().setValue(scroll)
        shown = _on_screen(area)
        offset = area.verticalScrollBar().value()
        expected = full_pixels[offset: offset + shown.shape[0], : shown.shape[1]]
        assert np.abs(shown[: expected.shape[0]].astype(int) - expected.astype(int)).max() <= 2, scroll
        top, bottom = _cached_rows(view)
        assert top <= offset and offset + area.viewport().height() <= bottom
        assert bottom - top >= min(2 * area.viewport().height(), view.height())   # a margin, for scrolling on
