"""Before/after bars for one prediction: the full model against the intervened run, with the change in log p.

Shown by the Next-token panel while interventions are in force; the numbers come from
core.experiment_runs.next_token_change.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor

from core.experiment_runs import NextTokenChange
from gui.candidate_bars import legible_rows_height
from gui.text_fit import elide
from gui.token_axis import TokenAxis

FULL_COLOUR = QColor("#9a9a9a")        # the full model
INTERVENED_COLOUR = QColor("#c0392b")  # with the interventions
BAR_HEIGHT = 0.38


class InterventionEffectView(pg.PlotWidget):
    def __init__(self, parent=None) -> None:
        super().__init__(parent, axisItems={"left": TokenAxis("left", offset=0, point_size=9)})
        self.setObjectName("intervention_effect")
        self.change: NextTokenChange | None = None
        self.labels: list[str] = []
        plot = self.getPlotItem()
        plot.invertY(True)
        plot.setMouseEnabled(x=False, y=False)
        plot.hideButtons()
        plot.setTitle("full model (grey) vs intervened (red)")
        plot.setLabel("bottom", "probability (%)")
        self.full_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=BAR_HEIGHT, brush=FULL_COLOUR, pen=None)
        self.after_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=BAR_HEIGHT, brush=INTERVENED_COLOUR, pen=None)
        plot.addItem(self.full_bars)
        plot.addItem(self.after_bars)

    def show_change(self, change: NextTokenChange, pieces: list[str]) -> None:
        """pieces: the readable piece of each of change.ids."""
        self.change = change
        legible_rows_height(self, len(change.ids), chrome=70)
        rows = np.arange(len(change.ids), dtype=float)
        self.full_bars.setOpts(x0=np.zeros_like(rows), y=rows - BAR_HEIGHT / 2, width=change.p_full * 100)
        self.after_bars.setOpts(x0=np.zeros_like(rows), y=rows + BAR_HEIGHT / 2, width=change.p_intervened * 100)
        # the piece elided as on every token axis, the change after it whole
        self.labels = [f"{elide(piece)}  Δlog p {delta:+.2f}" for piece, delta in zip(pieces, change.delta_logprob)]
        self.getPlotItem().getAxis("left").set_labels(self.labels, None)
        self.getPlotItem().setRange(xRange=(0, 100 * float(max(change.p_full.max(), change.p_intervened.max()))),
                                    yRange=(-0.6, len(rows) - 0.4), padding=0.02)
