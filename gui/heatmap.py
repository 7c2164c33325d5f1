"""A labelled matrix plot with cell picking (and numbers in its cells): the heatmap panels use.

Hover and click come from the ImageItem itself: its hover and click events carry the position in
image pixels (column = x, row = y, as in pyqtgraph's imageAnalysis example), so no panel converts
scene to view to cell coordinates by hand. Rows run down (row 0 on top), as in the arrays.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QImage, QPainter, QPainterPath, QPen

from gui import plotting
from gui.cell_picking import cell_of
from gui.fonts import ui_font
from gui.text_fit import LABEL_COLUMNS, elide
from gui.token_axis import TokenAxis


class PickableImage(pg.ImageItem):
    """An ImageItem that says which cell the mouse is over and which cell was clicked."""

    sigCellHovered = Signal(object)     # (row, col), or None when the mouse leaves the image
    sigCellClicked = Signal(int, int)   # (row, col), left button

    def __init__(self) -> None:
        super().__init__()
        self.setAcceptHoverEvents(True)

    def render(self) -> None:
        """pyqtgraph's image, premultiplied: Qt scales only that format straight to the screen; any other
        is converted pixel by pixel, on a thread pool, at every paint (milliseconds for one heatmap)."""
        super().render()
        if self.qimage is not None and self.qimage.format() != QImage.Format.Format_ARGB32_Premultiplied:
            self.qimage = self.qimage.convertToFormat(QImage.Format.Format_ARGB32_Premultiplied)

    def cell_at(self, pos: QPointF) -> tuple[int, int] | None:  # pos in item (pixel) coordinates
        return None if self.image is None else cell_of(pos, *self.image.shape[:2])

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


MIN_LABEL_CELL_PX = (26.0, 12.0)   # numbers are written into cells only when they fit

# Painting a PNG: cell text as filled glyph outlines, as the SVG (and the PDF made from it) has it. Qt's
# raster text (its glyph cache, with the platform's hinting and gamma) drew white numbers on dark cells a
# third heavier and a pixel taller than their outlines, which librsvg, cairo and poppler draw.
_outlined_text = False
_OUTLINES: dict[tuple[str, str], tuple[QPainterPath, float]] = {}   # (font key, text) -> (outline, advance)


@contextmanager
def cell_text_outlined() -> Iterator[None]:
    """While a figure is painted into a PNG, cell text is drawn as glyph outlines."""
    global _outlined_text
    before, _outlined_text = _outlined_text, True
    try:
        yield
    finally:
        _outlined_text = before


def draw_cell_text(painter, rect: QRectF, text: str) -> None:
    """`text` centred in `rect` in the painter's font and pen colour (outlined while a PNG is painted)."""
    if not _outlined_text:
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        return
    font = painter.font()
    key = (font.key(), text)
    outline = _OUTLINES.get(key)
    if outline is None:
        if len(_OUTLINES) > 10_000:
            _OUTLINES.clear()
        path = QPainterPath()
        path.addText(QPointF(0, 0), font, text)   # baseline at 0
        outline = _OUTLINES[key] = (path, QFontMetricsF(font).horizontalAdvance(text))
    path, advance = outline
    metrics = QFontMetricsF(font)
    baseline = rect.center().y() - metrics.height() / 2 + metrics.ascent()   # where drawText's AlignCenter puts it
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)   # as text is (the callers saved the painter)
    painter.fillPath(path.translated(rect.center().x() - advance / 2, baseline), painter.pen().color())


class CellText(pg.GraphicsObject):
    """Numbers written into matrix cells (values in [0, 1]): one item for all of them, drawn at screen size.

    One TextItem per cell would cost a QGraphicsItem each; this keeps the matrix and formats only
    the cells being painted, and none when the cells are too small on screen to hold a number.
    """

    def __init__(self) -> None:
        super().__init__()
        self.setFlag(pg.QtWidgets.QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption)  # fills exposedRect
        self.values = np.zeros((0, 0))                # [R, C]
        self.shown = np.zeros((0, 0), dtype=bool)     # [R, C] which cells get a number

    def set_matrix(self, values: np.ndarray, shown: np.ndarray) -> None:
        self.prepareGeometryChange()
        self.values, self.shown = values, shown
        self.update()

    def texts(self, rows: range | None = None) -> dict[tuple[int, int], str]:
        """(row, col) -> the string drawn there."""
        rows = range(self.values.shape[0]) if rows is None else rows
        return {(r, c): f"{self.values[r, c]:.2f}" for r in rows for c in np.nonzero(self.shown[r])[0].tolist()}

    def boundingRect(self) -> QRectF:
        return QRectF(0, 0, self.values.shape[1], self.values.shape[0])

    def paint(self, painter, option, *args) -> None:
        transform = painter.transform()  # data -> device
        width, height = abs(transform.m11()), abs(transform.m22())
        if width < MIN_LABEL_CELL_PX[0] or height < MIN_LABEL_CELL_PX[1]:
            return
        exposed = option.exposedRect  # only the rows on screen (long sentences scroll)
        rows = range(max(0, int(exposed.top())), min(self.values.shape[0], int(np.ceil(exposed.bottom())) + 1))
        painter.save()
        painter.resetTransform()
        painter.setFont(ui_font(7.5))
        for (r, c), text in self.texts(rows).items():
            centre = transform.map(QPointF(c + 0.5, r + 0.5))
            painter.setPen(text_colour(self.values[r, c]))
            draw_cell_text(painter, QRectF(centre.x() - width / 2, centre.y() - height / 2, width, height), text)
        painter.restore()


DARK_TEXT, LIGHT_TEXT = QColor(0, 0, 0), QColor(255, 255, 255)


def text_colour(value: float) -> QColor:
    """Dark text on the bright end of viridis, light text on the dark end."""
    return DARK_TEXT if value > 0.55 else LIGHT_TEXT


TOKEN_CELL_COLUMNS = 5      # a token in a cell: about as wide as the cell's "0.00" numbers elsewhere
MIN_TOKEN_CELL_PX = 14.0    # a cell narrower or lower than this shows no token (its tooltip does)
TURN_RATIO = 1.8            # a cell this many times taller than wide writes its token upwards


class TokenCellText(CellText):
    """The heatmap's cell painter writing a token (elided to fit) instead of a number in each cell."""

    def __init__(self) -> None:
        super().__init__()
        self.labels: list[list[str]] = []       # [R][C]

    def set_labels(self, labels: list[list[str]], values: np.ndarray) -> None:  # values [R, C] pick the text colour
        self.labels = [[elide(text, TOKEN_CELL_COLUMNS) for text in row] for row in labels]
        self.set_matrix(values, np.ones(values.shape, dtype=bool))

    def texts(self, rows: range | None = None) -> dict[tuple[int, int], str]:
        rows = range(len(self.labels)) if rows is None else rows
        return {(r, c): self.labels[r][c] for r in rows for c in range(len(self.labels[r]))}

    def paint(self, painter, option, *args) -> None:
        """Each token cut to its cell's pixels (the number cells' 26 px floor left a 16-token lens bare at
        1280 px); in a cell much taller than wide, turned to run up the cell."""
        transform = painter.transform()  # data -> device
        width, height = abs(transform.m11()), abs(transform.m22())
        if min(width, height) < MIN_TOKEN_CELL_PX:
            return
        turned = height > TURN_RATIO * width
        font = ui_font(7.5)
        metrics = QFontMetricsF(font)
        painter.save()
        painter.resetTransform()
        painter.setFont(font)
        for (r, c), label in self.texts().items():
            centre = transform.map(QPointF(c + 0.5, r + 0.5))
            upwards = turned and metrics.horizontalAdvance(label) > width - 4   # a CJK character stays upright
            along, across = (height, width) if upwards else (width, height)
            text = metrics.elidedText(label, Qt.TextElideMode.ElideRight, along - 4)
            painter.setPen(text_colour(self.values[r, c]))
            painter.save()
            painter.translate(centre)
            if upwards:
                painter.rotate(-90)
            draw_cell_text(painter, QRectF(-along / 2, -across / 2, along, across), text)
            painter.restore()
        painter.restore()


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
        if self.image.image is not None and self.image.image.shape[:2] == (rows, cols):
            self.image.setImage(rgba, levels=(0, 255))   # as many cells as before: the same rect and limits
        else:
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
