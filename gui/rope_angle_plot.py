"""RoPE's different rotation speeds: every pair's angle m·θ_i over the model's whole context (wrapped to
[0, 2π)), and θ_i per pair on a log scale (core.positions.pair_angle_view)."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from core import positions as pos
from core.trace import Trace
from gui.figure_tab import FigureTab
from gui.plot_shapes import KEY_COLOUR, line, pi_ticks
from gui.plotting import colormap
from gui.selection import Selection

MAX_LEGEND_PAIRS = 8


class RopeAnglePlot(FigureTab):
    figure_name = "positions_rope_angles"
    tab_title = "RoPE angles"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controls.setContentsMargins(0, 0, 0, 0)
        self.view: pos.PairAngles | None = None
        self.plot = self.frame.add_plot(row=0, col=0)
        self.plot.setLabel("bottom", "position m")
        self.plot.setLabel("left", "angle m·θᵢ, wrapped to [0, 2π)")
        pi_ticks(self.plot.getAxis("left"))
        self.plot.setYRange(0, 2 * np.pi, padding=0.02)
        self.legend = pg.LegendItem(labelTextSize="8pt", colCount=4, frame=False)
        self.frame.graphics.addItem(self.legend, row=1, col=0)
        self.sentence = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(0, 0, 0, 18), pen=pg.mkPen(None))
        self.plot.addItem(self.sentence)
        self.cursor = pg.InfiniteLine(angle=90, pen=pg.mkPen(KEY_COLOUR, width=1.5, style=Qt.DashLine))
        self.plot.addItem(self.cursor)
        self.speed = self.frame.add_plot(row=0, col=1)
        self.speed.setLogMode(False, True)
        self.speed.setLabel("bottom", "pair i")
        self.speed.setLabel("left", "θᵢ, radians per position")
        self.speed.setTitle("rotation speed", size="9pt")
        self.speed_points = pg.ScatterPlotItem(size=9, pen=None)
        self.speed.addItem(self.speed_points)
        self.frame.graphics.ci.layout.setColumnStretchFactor(0, 4)
        self.frame.graphics.ci.layout.setColumnStretchFactor(1, 1)
        self.curves: list[pg.PlotDataItem] = []

    def draw(self, trace: Trace, selection: Selection) -> None:
        cfg = trace.config
        context, n_pairs = cfg.max_position_embeddings, cfg.head_dim // 2
        view = self.view = pos.pair_angle_view(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling, context)
        colours = [colormap("viridis").map(x, mode="qcolor") for x in np.linspace(0.0, 0.9, n_pairs)]
        if len(self.curves) != n_pairs:
            self._rebuild_curves(n_pairs, colours)
        positions, wrapped, keep = np.arange(context), view.wrapped, view.wrap_breaks
        for i, curve in enumerate(self.curves):
            curve.setData(positions, wrapped[:, i], connect=keep[:, i])   # broken where it wraps past 2π
        m = selection.query_index(trace.n_tokens)
        self.sentence.setRegion((0, trace.n_tokens - 1))
        self.cursor.setValue(m)
        self.plot.setXRange(0, context - 1, padding=0.01)
        freq = view.frequency
        self.speed_points.setData(np.arange(n_pairs), np.log10(freq), brush=[pg.mkBrush(c) for c in colours])
        self.speed.setXRange(-0.5, n_pairs - 0.5, padding=0)
        self.plot.setTitle(f"angle of every pair over the {context}-token context", size="9pt")
        self.frame.caption.setText(
            f"<b>Different rotation speeds.</b> Each line is one of the {n_pairs} pairs: pair i turns by "
            f"θ<sub>i</sub> = {cfg.rope_theta:g}<sup>−2i/{cfg.head_dim}</sup> radians per position, so its angle "
            f"m·θ<sub>i</sub> grows linearly; shown <i>wrapped</i> to [0, 2π) (a drop is one full turn). "
            f"Pair 0 turns {np.degrees(freq[0]):.0f}° per token; pair {n_pairs - 1} only "
            f"{np.degrees(freq[-1]):.3g}°. Shaded: this sentence's positions; dashed: the selected token m = {m}.")

    def _rebuild_curves(self, n_pairs: int, colours) -> None:
        for curve in self.curves:
            self.plot.removeItem(curve)
        self.legend.clear()
        shown = set(np.round(np.linspace(0, n_pairs - 1, min(n_pairs, MAX_LEGEND_PAIRS))).astype(int))
        self.curves = []
        for i in range(n_pairs):
            curve = line(self.plot, pen=pg.mkPen(colours[i], width=1.5))
            if i in shown:
                self.legend.addItem(curve, f"pair {i}")
            self.curves.append(curve)

    def table(self) -> str:
        return self.view.csv()
