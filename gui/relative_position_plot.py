"""RoPE's relative-position property on the model's own q and k: moved together the score stays, moved
apart it changes; and the score against distance (core.positions.relative_demo)."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from core import positions as pos
from core.trace import Trace
from gui.figure_tab import FigureTab
from gui.plot_shapes import AFTER_COLOUR, DISTINCT_COLOURS, KEY_COLOUR, line
from gui.selection import Selection

DISTANCE_COLOUR = DISTINCT_COLOURS[2]   # green: neither the blue nor the vermillion of the shift plot


class RelativePositionPlot(FigureTab):
    figure_name = "positions_relative"
    tab_title = "Relative position"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controls.setContentsMargins(0, 0, 0, 0)
        self.demo: pos.RelativeDemo | None = None
        self.shift_plot = self.frame.add_plot(row=0, col=0)
        self.shift_plot.setLabel("bottom", "shift s")
        self.shift_plot.setLabel("left", "q·k (= score × √Dh)")
        self.both = line(self.shift_plot, pen=pg.mkPen(AFTER_COLOUR, width=3))
        self.query_only = line(self.shift_plot, pen=pg.mkPen(KEY_COLOUR, width=1.5))
        ink = pg.mkBrush(pg.getConfigOption("foreground"))   # the plot's text colour: seen on either theme
        self.actual_shift = pg.ScatterPlotItem(size=10, brush=ink, pen=None)
        self.shift_plot.addItem(self.actual_shift)
        self.distance_plot = self.frame.add_plot(row=0, col=1)
        self.distance_plot.setLabel("bottom", "relative distance m − n")
        self.distance_plot.setLabel("left", "q·k")
        # Its own colour: this curve is not either of the left plot's.
        self.by_distance = line(self.distance_plot, pen=pg.mkPen(DISTANCE_COLOUR, width=1.5))
        self.actual_distance = pg.InfiniteLine(angle=90, pen=pg.mkPen(KEY_COLOUR, width=1.5, style=Qt.DashLine))
        self.distance_plot.addItem(self.actual_distance)
        self.actual_point = pg.ScatterPlotItem(size=10, brush=ink, pen=None)
        self.distance_plot.addItem(self.actual_point)
        # Each plot's own key, under it: the two plots draw different things.
        self.shift_legend = self._legend(col=0, entries=(
            (self.both, "moved together: q at m+s, k at n+s"),
            (self.query_only, "moved apart: q at m+s, k stays at n"),
            (self.actual_shift, "s = 0: the sentence's own positions")))
        self.distance_legend = self._legend(col=1, entries=(
            (self.by_distance, "q at d, k at 0, for every distance d"),
            (pg.PlotDataItem(pen=self.actual_distance.pen), "this pair's distance m − n"),   # a line's sample
            (self.actual_point, "this pair's q·k")))

    def _legend(self, col: int, entries) -> pg.LegendItem:
        legend = pg.LegendItem(labelTextSize="9pt", colCount=1, frame=False)
        self.frame.graphics.addItem(legend, row=1, col=col)
        for item, name in entries:
            legend.addItem(item, name)
        return legend

    def draw(self, trace: Trace, selection: Selection) -> None:
        m, n = selection.query_index(trace.n_tokens), selection.key_index(trace.n_tokens)
        demo = self.demo = pos.relative_demo(trace, selection.layer, selection.head, m, n)
        self.both.setData(demo.shifts, demo.dot_shift_both)
        self.query_only.setData(demo.shifts, demo.dot_shift_query)
        self.actual_shift.setData([0], [demo.dot_at_shift(0)])
        self.shift_plot.setTitle(f"move both by s: m − n stays {demo.distance}", size="9pt")
        self.by_distance.setData(demo.distances, demo.dot_by_distance)
        self.actual_distance.setValue(demo.distance)
        self.actual_point.setData([demo.distance], [demo.dot_by_distance[demo.distance]])
        self.distance_plot.setTitle(f"q·k against distance (this pair: {demo.distance})", size="9pt")
        self.frame.caption.setText(_caption(trace, selection, demo))

    def table(self) -> str:
        return self.demo.csv()


def _caption(trace: Trace, selection: Selection, demo: pos.RelativeDemo) -> str:
    m, n = demo.query_pos, demo.key_pos
    same = " &nbsp;·&nbsp; ".join(f"({m + s}, {n + s}) → {demo.dot_at_shift(s):.6f}" for s in demo.example_shifts())
    apart = ""
    if m + 1 < demo.context:
        moved = demo.dot_shift_query[int(np.searchsorted(demo.shifts, 1))]
        apart = f"<br>Moved apart, (m+1, n) = ({m + 1}, {n}) → {moved:.6f}: the distance changed, so did q·k."
    return (f"<b>Only the distance matters.</b> Layer {selection.layer}, head {selection.head}: the model's "
            f"q of token {m} “{trace.label(m)}” and k of token {n} “{trace.label(n)}” (Query m / Key n above), "
            f"rotated as if they sat at positions (query, key):<br>"
            f"Moved together: {same}{apart}<br>"
            f"The runner's own q_rot·k_rot at ({m}, {n}) = {demo.runner_dot:.6f}.")
