"""The original Transformer's sinusoidal position encoding for this sentence: the table as a heatmap, and a
few of its dimensions as curves over position (core.positions.sinusoidal_view)."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from core import positions as pos
from core.trace import Trace
from gui.figure_tab import FigureTab
from gui.fitted_ticks import POWERS_OF_TWO, FittedTicks, numbers
from gui.plot_shapes import DISTINCT_COLOURS, line
from gui.plotting import DIVERGING, colormap, colour_bar, matrix_plot
from gui.selection import Selection
from gui.theme import ink

LEGEND_COLUMNS = 2   # under the curve plot; three held the figure wider than a 1280×800 screen's dock


class SinusoidPlot(FigureTab):
    figure_name = "positions_sinusoidal"
    tab_title = "Sinusoidal PE"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controls.setContentsMargins(0, 0, 0, 0)
        self.view: pos.SinusoidalView | None = None
        self.heat_plot = self.frame.add_plot(row=0, col=0)
        matrix_plot(self.heat_plot, "dimension", "position")
        self.heat_plot.setTitle("PE[position, dimension]", size="10pt")   # a title sets its plot's least width
        self.image = pg.ImageItem()
        self.heat_plot.addItem(self.image)
        self.bar = colour_bar(self.heat_plot, self.image, (-1.0, 1.0), colormap(DIVERGING), "PE value")
        self.dim_ticks = FittedTicks(self.heat_plot, "bottom", 30, POWERS_OF_TWO)
        self.position_ticks = FittedTicks(self.heat_plot, "left", 16)
        self.curve_plot = self.frame.add_plot(row=0, col=1)
        self.curve_plot.setLabel("bottom", "position")
        self.curve_plot.setLabel("left", "PE value")
        self.curve_plot.setTitle("a few dimensions over position", size="10pt")
        self.curve_plot.setYRange(-1.1, 1.1, padding=0)
        self.legend = pg.LegendItem(labelTextSize="8pt", colCount=LEGEND_COLUMNS, frame=False)
        self.frame.graphics.addItem(self.legend, row=1, col=1)
        self.curves: dict[int, tuple[pg.PlotDataItem, pg.ScatterPlotItem]] = {}

    def draw(self, trace: Trace, selection: Selection) -> None:
        n, d = trace.n_tokens, trace.config.hidden_size
        view = self.view = pos.sinusoidal_view(n, d)
        self.image.setImage(view.table, levels=(-1.0, 1.0), autoLevels=False)
        self.heat_plot.setRange(xRange=(0, d), yRange=(0, n), padding=0)
        self.dim_ticks.set_labels(numbers(d))
        self.position_ticks.set_labels(numbers(n))
        if tuple(sorted(self.curves)) != view.dims:
            self._rebuild_curves(view.dims)
        for dim, (curve, dots) in self.curves.items():
            curve.setData(view.smooth, view.curves[:, dim])
            dots.setData(range(n), view.table[:, dim])
        self.curve_plot.setXRange(0, max(n - 1, 1), padding=0.02)
        self.frame.caption.setText(
            f"<b>Sinusoidal position encoding — the original Transformer's way</b> "
            f"(Vaswani et al. 2017), for this sentence's {n} positions × D = {d}: "
            f"PE[pos, 2j] = sin(pos / 10000<sup>2j/D</sup>), PE[pos, 2j+1] = cos(…), always in [−1, 1]. "
            f"<span style='color:{ink('#bb0000', '#ff7070').name()}'>The loaded model does not use this table:</span> it uses RoPE "
            f"(see the RoPE tabs), rotating q and k inside attention instead of adding anything to the embedding.")

    def _rebuild_curves(self, dims: tuple[int, ...]) -> None:
        for curve, dots in self.curves.values():
            self.curve_plot.removeItem(curve)
            self.curve_plot.removeItem(dots)
        self.legend.clear()
        self.curves = {}
        for rank, dim in enumerate(dims):
            colour = DISTINCT_COLOURS[rank % len(DISTINCT_COLOURS)]   # hues evenly spaced put two greens side by side
            kind = "sin" if dim % 2 == 0 else "cos"
            curve = line(self.curve_plot, pen=pg.mkPen(colour, width=2))
            self.legend.addItem(curve, f"dim {dim} ({kind})")
            dots = pg.ScatterPlotItem(size=5, brush=pg.mkBrush(colour), pen=None)
            self.curve_plot.addItem(dots)
            self.curves[dim] = (curve, dots)

    def table(self) -> str:
        return self.view.csv()
