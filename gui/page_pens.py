"""A PNG painted at twice the page's pixels keeps the line weights the screen shows.

Most lines of the figures are drawn with cosmetic pens (pyqtgraph's mkPen, the heatmaps' outlines): their
width is in device pixels whatever the painter's scale, so a PNG painted at 2x drew every 1 px line as
a hairline half as heavy as on screen. While a PNG is painted, `cosmetic_pens_widened` multiplies
every cosmetic pen's width by the PNG's scale:

- the pens Python paint code sets (pyqtgraph's items, the app's own) — QPainter.setPen is wrapped for
  the painting only, and widens a pen set on a widget or a recorded picture, never one set on an image
  or pixmap (pyqtgraph's symbol atlas caches the symbols it draws into one, and would keep them heavy);
- the pens of Qt's own shape items (a rectangle's outline), set on the items and put back after;
- the pictures pyqtgraph recorded with the screen's pens (axes, bars): dropped before, so they are
  recorded again at the PNG's weight, and after, so the screen records its own again.

An SVG needs none of it: its cosmetic pens are written in page units and scale with the drawing.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import pyqtgraph as pg
from PySide6.QtGui import QImage, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QAbstractGraphicsShapeItem, QGraphicsItem, QGraphicsLineItem, QGraphicsView, QWidget

_RECORDED = (pg.AxisItem, pg.BarGraphItem)   # pyqtgraph items that paint from a QPicture in `picture`


def widened(pen: QPen, scale: float) -> QPen:
    """A copy of a cosmetic pen `scale` times as wide (a hairline, width 0, counts as 1 px)."""
    wide = QPen(pen)
    wide.setWidthF(max(pen.widthF(), 1.0) * scale)
    return wide


def _scene_items(widget: QWidget) -> list[QGraphicsItem]:
    views = [widget, *widget.findChildren(QGraphicsView)] if isinstance(widget, QGraphicsView) \
        else widget.findChildren(QGraphicsView)
    scenes = {id(view.scene()): view.scene() for view in views if view.scene() is not None}
    return [item for scene in scenes.values() for item in scene.items()]


def _forget_pictures(items: list[QGraphicsItem]) -> None:
    for item in items:
        if isinstance(item, _RECORDED):
            item.picture = None


@contextmanager
def cosmetic_pens_widened(widget: QWidget, scale: float) -> Iterator[None]:
    """While the caller paints `widget` at `scale` (> 1), its cosmetic pens are `scale` times as wide."""
    if scale <= 1.0:   # a smaller PNG keeps 1 px lines: thinner ones would fade out
        yield
        return
    items = _scene_items(widget)
    shapes = [(item, item.pen()) for item in items
              if isinstance(item, (QAbstractGraphicsShapeItem, QGraphicsLineItem)) and item.pen().isCosmetic()]
    set_pen = QPainter.setPen

    def set_widened_pen(painter: QPainter, pen, *args) -> None:
        if isinstance(pen, QPen) and pen.isCosmetic() and not isinstance(painter.device(), (QImage, QPixmap)):
            pen = widened(pen, scale)
        set_pen(painter, pen, *args)

    QPainter.setPen = set_widened_pen
    for item, pen in shapes:
        item.setPen(widened(pen, scale))
    _forget_pictures(items)
    try:
        yield
    finally:
        QPainter.setPen = set_pen
        for item, pen in shapes:
            item.setPen(pen)
        _forget_pictures(items)
