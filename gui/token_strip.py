"""A value per token drawn on the sentence itself: each token's text over its colour, and the scale beside it.

TokenStrip is a ChipFlow (the tokens wrap like text, and render to PNG/SVG as on screen) whose text
is dark or light by its fill, so a token stays legible at either end of a colour map. ColourScale is
the horizontal key: the colour map from its low to its high value, with both ends and the middle
written under it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QLinearGradient, QPainter
from PySide6.QtWidgets import QSizePolicy, QWidget

from gui import plotting
from gui.chip_flow import Chip, ChipFlow
from gui.fonts import ui_font
from gui.theme import page_background, page_ink, readable_on





def token_fills(values: np.ndarray, levels: tuple[float, float], cmap: pg.ColorMap) -> list[QColor]:  # [T] -> T
    """Each value's colour on the map."""
    rgba = plotting.masked_rgba(np.asarray(values, np.float64)[None, :], levels, cmap)[0]
    return [QColor(int(r), int(g), int(b)) for r, g, b, _ in rgba]


def _shown(value_format: str, value: float) -> str:
    """value in value_format; one that rounds to zero reads as zero ("+0.00", never "-0.00")."""
    text, zero = value_format.format(value), value_format.format(0.0)
    return zero if text.lstrip("+-") == zero.lstrip("+-") else text


class TokenStrip(ChipFlow):
    """Tokens as chips filled with their value's colour; the text contrasts with the fill."""
    themed_fills = False   # a colour map's colours: the same on either theme
    kept_boxes = False     # nearly every chip has a fill of its own: a picture of it would not be reused

    def set_values(self, labels: Sequence[str], values: np.ndarray, levels: tuple[float, float],
                   cmap: pg.ColorMap, value_format: str = "{:+.2f}", skipped: str = "") -> None:
        """One chip per token: its label, then its value (`skipped`, on grey, where the value is NaN)."""
        values = np.asarray(values, np.float64)
        not_measured = QColor(*plotting.masked_colour()[:3])   # a NaN value: the token was not measured (after P)
        chips = [Chip((label, skipped), not_measured) if np.isnan(value) else
                 Chip((label, _shown(value_format, value)), fill)
                 for label, value, fill in zip(labels, values, token_fills(values, levels, cmap))]
        self.set_chips(chips)

    def _draw_lines(self, painter: QPainter, shown: list[int], big: bool) -> None:
        """As ChipFlow draws them, each in the colour its fill needs."""
        painter.setFont(self._big if big else self._small)
        for index in shown:
            painter.setPen(readable_on(self._chips[index].fill))
            self._draw_chip_lines(painter, index, big)


class ColourScale(QWidget):
    """A horizontal colour key: the map from low (left) to high (right), the ends and middle labelled."""

    def __init__(self, cmap: pg.ColorMap, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._cmap, self._title = cmap, title
        self._levels = (0.0, 1.0)
        self._font = ui_font(8)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(int(QFontMetricsF(self._font).height() * 2 + 16))

    def set_levels(self, levels: tuple[float, float]) -> None:
        self._levels = plotting.finite_levels(levels)
        self.update()

    def levels(self) -> tuple[float, float]:
        return self._levels

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(320, self.height())

    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.fillRect(self.rect(), page_background())
        metrics = QFontMetricsF(self._font)
        painter.setFont(self._font)
        title_width = metrics.horizontalAdvance(self._title) + 12
        bar = QRectF(title_width, 4, max(40.0, min(self.width() - title_width - 30, 360)), metrics.height())
        painter.setPen(page_ink())
        painter.drawText(QRectF(0, bar.top(), title_width, bar.height()),
                         Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, self._title)
        gradient = QLinearGradient(bar.topLeft(), bar.topRight())
        lut = self._cmap.getLookupTable(0.0, 1.0, 16, alpha=False)
        for i, (r, g, b) in enumerate(lut):
            gradient.setColorAt(i / (len(lut) - 1), QColor(int(r), int(g), int(b)))
        painter.fillRect(bar, gradient)
        painter.drawRect(bar)
        low, high = self._levels
        for fraction, value in ((0.0, low), (0.5, (low + high) / 2), (1.0, high)):
            text = f"{value:+.3g}" if low < 0 else f"{value:.3g}"
            x = bar.left() + fraction * bar.width() - metrics.horizontalAdvance(text) / 2
            painter.drawText(QPointF(max(x, bar.left() - 4), bar.bottom() + 4 + metrics.ascent()), text)
