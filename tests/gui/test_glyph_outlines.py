"""Text outlined from cached glyphs draws what QPainterPath.addText draws, in English and Chinese."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QByteArray, QPointF, QRectF
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPainterPath
from PySide6.QtSvg import QSvgRenderer

from gui.fonts import register_fonts
from gui.glyph_outlines import UNITS_PER_PIXEL, text_path_data

ZOOM = 4   # compared 4x enlarged: a misplaced or missing glyph changes many pixels


def coverage(draw, box: QRectF) -> np.ndarray:  # -> [H, W] ink, 0..255
    width, height = round(box.width() * ZOOM) + 16, round(box.height() * ZOOM) + 16
    image = QImage(width, height, QImage.Format.Format_Grayscale8)
    image.fill(QColor("white"))
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.scale(ZOOM, ZOOM)
    painter.translate(2 - box.x(), 2 - box.y())
    draw(painter)
    painter.end()
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(height, image.bytesPerLine())[:, :width]
    return 255 - rows.astype(np.int32)


@pytest.mark.parametrize("text", ["The cat sat on the mat, 0.25%", "订单成交，订单取消。", "L3 H1 → 位置 12"])
def test_glyph_path_data_draws_what_add_text_draws(qapp, text):
    register_fonts()
    font = QFont()
    font.setPixelSize(15)
    reference = QPainterPath()
    reference.addText(QPointF(0, 0), font, text)
    box = reference.boundingRect()
    d = text_path_data(font, text)
    svg = (b'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1" viewBox="0 0 1 1" overflow="visible">'
           b'<path transform="scale(%g)" d="%s"/></svg>' % (1 / UNITS_PER_PIXEL, d))
    renderer = QSvgRenderer(QByteArray(svg))
    expected = coverage(lambda painter: painter.fillPath(reference, QColor("black")), box)
    drawn = coverage(lambda painter: renderer.render(painter, QRectF(0, 0, 1, 1)), box)
    assert expected.sum() > 0
    assert np.abs(expected - drawn).mean() < 2.0              # of 255: anti-aliasing, nothing more
    assert abs(int(drawn.sum()) - int(expected.sum())) < 0.02 * expected.sum()


def test_blank_text_has_no_outline(qapp):
    assert text_path_data(QFont(), "   ") == b""
