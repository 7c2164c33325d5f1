"""One tab of a panel that shows one exportable figure: optional controls above a frame of plots on the figures' paper.

The frame (caption + plots, no controls) is what the figure exports. A tab draws lazily: the panel
marks it stale and draws it when it is shown, or when figures are asked for.
"""
from __future__ import annotations

from typing import Callable

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from core.trace import Trace
from gui.plot_shapes import plain_axes
from gui.selection import Selection
from gui.theme import page_style
from gui.token_axis import TokenAxis


def caption(text: str = "") -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    label.setTextFormat(Qt.RichText)
    label.setContentsMargins(6, 2, 6, 2)
    return label


class FigureFrame(QWidget):
    """What one figure exports: a caption and the plots."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAutoFillBackground(True)
        self.setStyleSheet(page_style())   # the caption on the plots' paper, in either theme
        self.caption = caption()
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setMinimumHeight(260)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.caption)
        layout.addWidget(self.graphics, 1)
        self.page_hooks: list[Callable[[bool], None]] = []   # told when the frame goes on a page and back

    def set_on_page(self, on_page: bool) -> None:
        """On an exported page (gui.figure_pages.on_page): the tab's hooks drop what only the screen needs."""
        for hook in self.page_hooks:
            hook(on_page)

    def add_plot(self, row: int, col: int, token_rows: bool = False) -> pg.PlotItem:
        """token_rows: a TokenAxis on the left names the rows (tokens)."""
        axes = {"left": TokenAxis("left")} if token_rows else {}
        return plain_axes(self.graphics.addPlot(row=row, col=col, axisItems=axes))


class FigureTab(QWidget):
    """Subclasses set figure_name and tab_title, build their plots in self.frame, and implement
    draw(trace, selection) and table() (the figure's CSV)."""
    figure_name = ""
    tab_title = ""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.frame = FigureFrame()
        self.controls = QHBoxLayout()
        self.controls.setContentsMargins(6, 2, 6, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(self.controls)
        layout.addWidget(self.frame, 1)
        self.stale = True

    def draw(self, trace: Trace, selection: Selection) -> None:
        raise NotImplementedError

    def table(self) -> str:
        raise NotImplementedError

    def extra_tables(self) -> dict:
        """More CSV files of this figure: {name: callable returning CSV text}."""
        return {}
