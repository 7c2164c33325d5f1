"""The Next-token chart: one row per candidate, most likely on top, two bars per row, picked by mouse or keys.

Row i is the unit cell [i, i+1) (gui.cell_picking). A wide pale bar is the softmax at temperature 1,
a narrow solid one the distribution after the sampling settings; candidates the settings rule out
are grey with a dashed outline (no hatch pattern: SVG exports would lose it). A click on a row (bar
or label), a key 1–9 or Enter on the highlighted row emits sigRowChosen; the chart never appends.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import QWidget

from core.sampling import Candidates
from gui import plotting
from gui.cell_picking import row_under
from gui.fast_axis import FastAxis
from gui.fonts import ui_font
from gui.token_axis import TokenAxis

AFTER_COLOUR = QColor("#2c5f8a")       # solid: the distribution sampling draws from
RAW_COLOUR = QColor("#b7d0e6")         # pale: softmax at temperature 1
RULED_OUT_FILL = QColor("#e3e3e3")     # grey, dashed outline: the settings rule the candidate out
RULED_OUT_EDGE = QColor("#7a7a7a")
CURSOR_COLOUR = QColor("#fff1b8")      # the row Enter would choose (only while the chart has focus)
RAW_BAR_HEIGHT = 0.8                   # in rows
AFTER_BAR_HEIGHT = 0.38


ROW_PX = 18          # a 9 pt row label and a little air: below this the axis drops every other rank
LABELLED_ROWS = 20   # rows that always get their own label; beyond, the axis thins them (50 bars: no 1,000 px page)
CANDIDATE_AXIS_SLACK = 64   # px a side axis may keep to spare (its labels: candidates ~45-105 px wide, rank or %)


def legible_rows_height(view: QWidget, rows: int, chrome: int) -> None:
    """ROW_PX a row up to LABELLED_ROWS (chrome: title and axis), so those rows keep their labels; the page
    scrolls instead of squeezing them."""
    height = max(160, min(rows, LABELLED_ROWS) * ROW_PX + chrome)
    if view.minimumHeight() != height:   # a new minimum relays out the window: only when it changes
        view.setMinimumHeight(height)


class CandidateBars(pg.PlotWidget):
    sigRowChosen = Signal(int)       # a row clicked, its rank key pressed, or Enter on the highlighted row
    sigRowHovered = Signal(object)   # the row under the mouse, or None

    def __init__(self, parent=None) -> None:
        # The candidates change far more from sentence to sentence than a sentence's own tokens: with this much
        # slack the bars keep their place (and the plot its layout) instead of moving with the widest label.
        side = dict(point_size=9, slack=CANDIDATE_AXIS_SLACK)
        super().__init__(parent, axisItems={"left": TokenAxis("left", **side), "right": TokenAxis("right", **side),
                                            "bottom": FastAxis("bottom")})
        self.rows = 0
        self.cursor_row = 0              # the row Enter chooses
        self._keyboard_used = False      # the cursor row is highlighted only after arrow keys
        self._cursor_drawn: tuple[float, float] | None = None   # (row centre, width) of the band shown, if any
        self.setFocusPolicy(Qt.StrongFocus)  # so 1–9 and Enter reach it
        plot = self.getPlotItem()
        plot.invertY(True)                   # rank 1 on top
        plot.setMouseEnabled(x=False, y=False)
        plot.hideButtons()
        plot.setContentsMargins(0, 8, 4, 0)  # room for a row label that sticks out above the top row
        plot.setLabel("bottom", "probability (%)")
        plot.showAxis("right")
        plot.getAxis("bottom").setStyle(tickFont=ui_font())
        plotting.without_si_prefixes(plot)   # percent needs no prefix
        for name in ("left", "right"):
            plot.getAxis(name).setStyle(tickLength=0)
        self.cursor_band = pg.BarGraphItem(x0=[], y=[], width=[], height=1.0, brush=CURSOR_COLOUR, pen=pg.mkPen(None))
        self.raw_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=RAW_BAR_HEIGHT)
        self.after_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=AFTER_BAR_HEIGHT,
                                          brush=AFTER_COLOUR, pen=pg.mkPen(None))
        for item in (self.cursor_band, self.raw_bars, self.after_bars):
            plot.addItem(item)
        self.scene().sigMouseClicked.connect(self._on_clicked)
        self.scene().sigMouseMoved.connect(lambda pos: self.sigRowHovered.emit(self.row_at(pos)))

    def show_candidates(self, c: Candidates | None, left: list[str], right: list[str]) -> None:
        """c's rows as bars (x in percent, like the labels); left / right: each row's labels."""
        plot = self.getPlotItem()
        self.rows = 0 if c is None else len(c.ids)
        legible_rows_height(self, self.rows, chrome=50)
        self.cursor_row = min(self.cursor_row, max(0, self.rows - 1))
        if c is None:
            for item in (self.cursor_band, self.raw_bars, self.after_bars):
                item.setOpts(x0=[], y=[], width=[])
            self._cursor_drawn = None
            for name in ("left", "right"):
                plot.getAxis(name).set_labels([])
            plot.setRange(xRange=(0, 1), yRange=(0, 1), padding=0)
            return
        rows = np.arange(self.rows, dtype=float) + 0.5   # the centre of cell [i, i+1)
        ruled_out = ~c.in_sampling_set
        self.raw_bars.setOpts(x0=np.zeros_like(rows), y=rows, width=100 * c.probability,
                              brushes=[_raw_brush(out) for out in ruled_out], pens=[_raw_pen(out) for out in ruled_out])
        self.after_bars.setOpts(x0=np.zeros_like(rows), y=rows, width=100 * c.after)
        plot.getAxis("left").set_labels(left, columns=None)
        plot.getAxis("right").set_labels(right, columns=None)
        x_max = 100 * max(float(c.probability.max()), float(c.after.max())) * 1.04
        plot.setRange(xRange=(0, x_max), yRange=(0, self.rows), padding=0)
        self._draw_cursor()

    def row_at(self, scene_pos) -> int | None:
        """The candidate row under a scene point (anywhere across the plot, labels included)."""
        return row_under(self.getPlotItem(), scene_pos, self.rows)

    def _draw_cursor(self) -> None:
        """The highlight appears once the arrow keys are used, so exported figures stay clean."""
        visible = self.hasFocus() and self._keyboard_used and self.rows > 0
        band = (self.cursor_row + 0.5, self.getPlotItem().vb.viewRange()[0][1]) if visible else None
        if band == self._cursor_drawn:   # every new sentence asks: an unchanged band is not set (and redrawn) again
            return
        self._cursor_drawn = band
        self.cursor_band.setOpts(x0=[0.0] if band else [], y=[band[0]] if band else [], width=[band[1]] if band else [])

    def _on_clicked(self, event) -> None:
        row = self.row_at(event.scenePos()) if event.button() == Qt.LeftButton else None
        if row is not None:
            self.cursor_row = row
            self.sigRowChosen.emit(row)

    def keyPressEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        """1–9 choose that rank; Up/Down move the highlight; Enter chooses the highlighted row."""
        key = event.key()
        if self.rows and Qt.Key_1 <= key <= Qt.Key_9:
            self.sigRowChosen.emit(key - Qt.Key_1)
        elif self.rows and key in (Qt.Key_Return, Qt.Key_Enter):
            self.sigRowChosen.emit(self.cursor_row)
        elif self.rows and key in (Qt.Key_Up, Qt.Key_Down):
            self._keyboard_used = True
            self.cursor_row = int(np.clip(self.cursor_row + (-1 if key == Qt.Key_Up else 1), 0, self.rows - 1))
            self._draw_cursor()
        else:
            super().keyPressEvent(event)

    def focusInEvent(self, event) -> None:  # noqa: N802
        super().focusInEvent(event)
        self._draw_cursor()

    def focusOutEvent(self, event) -> None:  # noqa: N802
        super().focusOutEvent(event)
        self._keyboard_used = False
        self._draw_cursor()


@lru_cache(maxsize=2)   # one of each, shared by every row and chart: BarGraphItem only reads them
def _raw_brush(ruled_out: bool) -> QBrush:
    return QBrush(RULED_OUT_FILL if ruled_out else RAW_COLOUR)


@lru_cache(maxsize=2)
def _raw_pen(ruled_out: bool) -> QPen:
    if ruled_out:
        return pg.mkPen(RULED_OUT_EDGE, width=1, style=Qt.DashLine)
    return pg.mkPen(RAW_COLOUR.darker(130), width=1)
