"""A figure's frame: the widgets of one exportable picture stacked on the figures' paper (gui.theme).

Exports render the frame as it is on screen; its paper and ink are the theme's, never the desktop's,
so a PNG or SVG prints the same on every machine, and a dark figure is dark from edge to edge.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QTableView, QVBoxLayout, QWidget

from gui.theme import paint_as_page


def figure_frame(*widgets: QWidget, stretch: int | None = None) -> QWidget:
    """A QWidget on the figures' paper holding `widgets` top to bottom; the one at index `stretch` takes
    the spare height."""
    frame = QWidget()
    paint_as_page(frame)
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
