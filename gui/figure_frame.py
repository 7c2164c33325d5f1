"""A figure's frame: the widgets of one exportable picture stacked on white, whatever the desktop theme.

Exports render the frame as it is on screen, so a white background and black text make a PNG or
SVG print the same on every machine.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QFrame, QScrollArea, QTableView, QVBoxLayout, QWidget


def figure_frame(*widgets: QWidget, stretch: int | None = None) -> QWidget:
    """A white QWidget holding `widgets` top to bottom; the one at index `stretch` takes the spare height."""
    frame = QWidget()
    frame.setAutoFillBackground(True)
    palette = frame.palette()
    palette.setColor(frame.backgroundRole(), QColor("white"))
    palette.setColor(frame.foregroundRole(), QColor("black"))
    frame.setPalette(palette)
    layout = QVBoxLayout(frame)
    layout.setContentsMargins(4, 4, 4, 4)
    for i, widget in enumerate(widgets):
        layout.addWidget(widget, 1 if i == stretch else 0)
    return frame


def show_every_row(table: QTableView, row_height: int = 22) -> None:
    """Size a table to hold all its rows, so the exported figure has no scroll bar hiding some of them."""
    table.verticalHeader().setDefaultSectionSize(row_height)
    table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    rows = sum(table.rowHeight(r) for r in range(table.model().rowCount()))
    table.setFixedHeight(rows + table.horizontalHeader().sizeHint().height() + 2 * table.frameWidth() + 2)


def scrolling(page: QWidget) -> QScrollArea:
    """A panel page taller than its dock scrolls instead of squeezing its figures."""
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setWidget(page)
    return area
