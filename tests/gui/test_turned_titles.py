"""A left axis's title is drawn turned a quarter counter-clockwise: its arrow must still point down the rows."""
from __future__ import annotations

import numpy as np
from PySide6.QtGui import QImage, QPainter, QTransform

from gui.heatmap import Heatmap
from gui.plotting import turned_title


def test_a_down_arrow_becomes_a_left_arrow_at_the_start():
    assert turned_title("query token ↓") == "← query token"
    assert turned_title("tokens 2–13 of 14") == "tokens 2–13 of 14"   # no arrow: as written


def test_the_turned_left_arrow_points_down_on_screen(qapp):
    """Draw "←" turned as pyqtgraph turns a left title (−90°): its ink is then taller than wide and its
    tip (the widest row of ink) is at the bottom."""
    image = QImage(60, 60, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(0)
    painter = QPainter(image)
    painter.setTransform(QTransform().translate(30, 30).rotate(-90))
    font = painter.font()
    font.setPixelSize(36)
    painter.setFont(font)
    painter.drawText(-18, 12, "←")
    painter.end()
    alpha = np.frombuffer(image.constBits(), np.uint8).reshape(60, 60, 4)[..., 3] > 64
    rows = np.flatnonzero(alpha.any(axis=1))
    widths = alpha.sum(axis=1)[rows]
    assert rows.size > alpha.any(axis=0).sum()              # an up-down stroke
    assert np.argmax(widths) > len(widths) // 2             # the arrow head is in the lower half


def test_heatmaps_turn_their_row_titles(qapp):
    assert Heatmap("key token →", "query token ↓").getAxis("left").labelText == "← query token"
