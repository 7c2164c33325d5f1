"""RoPE's different rotation speeds: every pair's angle m·θ_i over the sentence's positions (wrapped to
[0, 2π)), and θ_i per pair on a log scale (core.positions.pair_angle_view).

The angles are drawn over the sentence (and a few positions past it), not the whole context: over 256
positions the fast pairs are a dense hatch and the sentence a sliver. A few pairs spread from the fastest
to the slowest are drawn in colours told apart at a glance (the legend names them, the speed plot shows
the same colours); the others are thin grey lines behind them. The CSV holds every pair over the context.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from core import positions as pos
from core.trace import Trace
from gui.figure_tab import FigureTab
from gui.plot_shapes import DISTINCT_COLOURS, KEY_COLOUR, OTHER_COLOUR, line, pi_ticks
from gui.selection import Selection

LEGEND_COLUMNS = 3   # four held the figure wider than a 1280×800 screen's dock: the speed plot went out of view


def shown_positions(n_tokens: int, context: int) -> int:
    """The last position drawn: the sentence's, and a margin past it (an eighth of it, at least 2)."""
    return min(context - 1, max(1, n_tokens - 1 + max(2, n_tokens // 8)))


def highlighted_pairs(n_pairs: int) -> list[int]:
    """The pairs drawn in colour: the fastest ones (each a different slope over a sentence), then one in
    the middle and the slowest (over a sentence both barely move: the point the speed plot makes)."""
    fast = list(range(min(n_pairs, len(DISTINCT_COLOURS) - 2)))
    return sorted(set(fast + [n_pairs // 2, n_pairs - 1]))


def integer_ticks(axis: pg.AxisItem, end: float, labels: int = 8) -> None:
    """Ticks on whole numbers only (1, 2 or 5 × 10^k apart, about `labels` labels): none between tokens."""
    major = next(step * 10 ** k for k in range(8) for step in (1, 2, 5) if step * 10 ** k >= end / labels)
    axis.setTickSpacing(major, max(1, major // 5) if major >= 5 else 1)


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
        self.legend = pg.LegendItem(labelTextSize="9pt", colCount=LEGEND_COLUMNS, frame=False)
        self.frame.graphics.addItem(self.legend, row=1, col=0, colspan=2)
        self.sentence = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(0, 0, 0, 18), pen=pg.mkPen(None))
        self.plot.addItem(self.sentence)
        self.cursor = pg.InfiniteLine(angle=90, pen=pg.mkPen(KEY_COLOUR, width=1.5, style=Qt.DashLine))
        self.plot.addItem(self.cursor)
        self.token_points = pg.ScatterPlotItem(size=6, pen=None)
        self.token_points.setZValue(3)
        self.plot.addItem(self.token_points)
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
        self._built_for: np.ndarray | None = None   # [P] the frequencies the curves and legend were made for

    def draw(self, trace: Trace, selection: Selection) -> None:
        cfg = trace.config
        context, n_pairs = cfg.max_position_embeddings, cfg.head_dim // 2
        view = self.view = pos.pair_angle_view(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling, context)
        highlighted = highlighted_pairs(n_pairs)
        if self._built_for is None or not np.array_equal(self._built_for, view.frequency):   # the legend names them
            self._rebuild_curves(view.frequency, highlighted)
        end = shown_positions(trace.n_tokens, context)
        for frequency, curve in zip(view.frequency, self.curves):   # straight up to 2π, broken where it wraps
            drawn = pos.wrapped_line(float(frequency), end)
            curve.setData(drawn.positions, drawn.angles, connect=drawn.connect)
        tokens, brushes = np.arange(trace.n_tokens), [pg.mkBrush(DISTINCT_COLOURS[k]) for k in range(len(highlighted))]
        self.token_points.setData(np.repeat(tokens, len(highlighted)),   # [T * k]: token by token, pair by pair
                                  view.wrapped[: trace.n_tokens, highlighted].ravel(), brush=brushes * len(tokens))
        m = selection.query_index(trace.n_tokens)
        self.sentence.setRegion((0, trace.n_tokens - 1))
        self.cursor.setValue(m)
        self.plot.setXRange(0, end, padding=0.01)
        integer_ticks(self.plot.getAxis("bottom"), end)
        freq = view.frequency
        colours = [OTHER_COLOUR] * n_pairs
        for k, i in enumerate(highlighted):
            colours[i] = DISTINCT_COLOURS[k]
        self.speed_points.setData(np.arange(n_pairs), np.log10(freq), brush=[pg.mkBrush(c) for c in colours])
        self.speed.setXRange(-0.5, n_pairs - 0.5, padding=0)
        integer_ticks(self.speed.getAxis("bottom"), n_pairs, labels=4)
        self.plot.setTitle(f"angle of every pair at this sentence's {trace.n_tokens} positions<br>"   # two lines:
                           f"(the model reads up to {context})", size="9pt")   # one set the plot's least width
        self.frame.caption.setText(
            f"<b>Different rotation speeds.</b> Each line is one of the {n_pairs} pairs: pair i turns by "
            f"θ<sub>i</sub> = {cfg.rope_theta:g}<sup>−2i/{cfg.head_dim}</sup> radians per position, so its angle "
            f"m·θ<sub>i</sub> grows linearly; shown <i>wrapped</i> to [0, 2π) (a drop is one full turn). "
            f"Pair 0 turns {np.degrees(freq[0]):.0f}° per token; pair {n_pairs - 1} only "
            f"{np.degrees(freq[-1]):.3g}°. Coloured: the fastest pairs, a middle one and the slowest (dots: the "
            f"angle each token gets); grey: the others. Shaded: this sentence's positions; "
            f"dashed: the selected token m = {m}.")

    def _rebuild_curves(self, frequency: np.ndarray, highlighted: list[int]) -> None:  # [P] radians per position
        n_pairs = len(frequency)
        for curve in self.curves:
            self.plot.removeItem(curve)
        self.legend.clear()
        self.curves = []
        for i in range(n_pairs):
            if i in highlighted:
                pen = pg.mkPen(DISTINCT_COLOURS[highlighted.index(i)], width=2)
            else:
                pen = pg.mkPen(OTHER_COLOUR, width=1)
            curve = line(self.plot, pen=pen)
            curve.setZValue(2 if i in highlighted else 1)   # the coloured pairs over the grey ones
            self.curves.append(curve)
        self._built_for = frequency
        for i in highlighted:
            self.legend.addItem(self.curves[i], f"pair {i}: {np.degrees(frequency[i]):.3g}° per token")

    def table(self) -> str:
        return self.view.csv()
