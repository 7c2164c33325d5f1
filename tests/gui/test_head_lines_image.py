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
