"""A labelled matrix plot with cell picking: the heatmap every panel that shows a matrix uses.

Hover and click come from the ImageItem itself: its hover and click events carry the position in
image pixels (column = x, row = y, as in pyqtgraph's imageAnalysis example), so no panel converts
scene to view to cell coordinates by hand. Rows run down (row 0 on top), as in the arrays.
"""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainterPath, QPen

from gui import plotting
from gui.text_fit import LABEL_COLUMNS
from gui.token_axis import TokenAxis


class PickableImage(pg.ImageItem):
    """An ImageItem that says which cell the mouse is over and which cell was clicked."""

    sigCellHovered = Signal(object)     # (row, col), or None when the mouse leaves the image
    sigCellClicked = Signal(int, int)   # (row, col), left button

    def __init__(self) -> None:
        super().__init__()
        self.setAcceptHoverEvents(True)

    def cell_at(self, pos: QPointF) -> tuple[int, int] | None:  # pos in item (pixel) coordinates
        image = self.image
        if image is None:
            return None
        row, col = math.floor(pos.y()), math.floor(pos.x())
        return (row, col) if 0 <= row < image.shape[0] and 0 <= col < image.shape[1] else None

    def hoverEvent(self, event) -> None:  # noqa: N802 (pyqtgraph's name)
        self.sigCellHovered.emit(None if event.isExit() else self.cell_at(event.pos()))

    def mouseClickEvent(self, event) -> None:  # noqa: N802
        cell = self.cell_at(event.pos())
        if cell is not None and event.button() == Qt.MouseButton.LeftButton:
            event.accept()
            self.sigCellClicked.emit(*cell)


def cosmetic_pen(colour: QColor, width: float, style=Qt.PenStyle.SolidLine) -> QPen:
    pen = QPen(colour, width, style)
    pen.setCosmetic(True)  # width in screen pixels, whatever the zoom
    return pen


def outline(colour: QColor, width: float, style=Qt.PenStyle.SolidLine) -> pg.QtWidgets.QGraphicsPathItem:
    """An outline drawn over cells (see cells_path), above the image."""
    item = pg.QtWidgets.QGraphicsPathItem()
    item.setPen(cosmetic_pen(colour, width, style))
    item.setZValue(10)
    return item


def cells_path(cells, width: float = 1.0) -> QPainterPath:  # (row, col) pairs -> unit squares
    path = QPainterPath()
    for row, col in cells:
        path.addRect(QRectF(col, row, width, 1))
    return path


class Heatmap(pg.PlotItem):
    """A PlotItem showing one matrix: rows down, token (or other) names on its axes, cells pickable.

    rows_named / cols_named: a TokenAxis on the left / bottom, filled by set_row_labels /
    set_col_labels; otherwise a plain axis (set its ticks yourself).
    """

    def __init__(self, x_title: str, y_title: str, rows_named: bool = True, cols_named: bool = True) -> None:
        axes = {}
        if rows_named:
            axes["left"] = TokenAxis("left")
        if cols_named:
            axes["bottom"] = TokenAxis("bottom")
        super().__init__(axisItems=axes)
        plotting.matrix_plot(self, x_title, y_title)
        self.hideButtons()
        self.image = PickableImage()
        self.addItem(self.image)
        self.sigCellHovered, self.sigCellClicked = self.image.sigCellHovered, self.image.sigCellClicked

    def set_rgba(self, rgba: np.ndarray) -> None:  # [R, C, 4] uint8
        """Show a coloured matrix with each cell one unit square, the whole of it in view."""
        rows, cols = rgba.shape[:2]
        self.image.setImage(rgba, levels=(0, 255), rect=QRectF(0, 0, cols, rows))
        self.setLimits(xMin=0, xMax=cols, yMin=0, yMax=rows)
        self.setRange(xRange=(0, cols), yRange=(0, rows), padding=0)

    def set_row_labels(self, labels, columns: int = LABEL_COLUMNS) -> None:
        self.getAxis("left").set_labels(labels, columns)

    def set_col_labels(self, labels, columns: int = LABEL_COLUMNS) -> None:
        self.getAxis("bottom").set_labels(labels, columns)

    def add_outline(self, colour: QColor, width: float, style=Qt.PenStyle.SolidLine):
        item = outline(colour, width, style)
        self.addItem(item)
        return item

    def cell_centre(self, row: int, col: int) -> QPointF:
        """The centre of a cell in scene coordinates (for tests that click or hover it)."""
        return self.vb.mapViewToScene(QPointF(col + 0.5, row + 0.5))
