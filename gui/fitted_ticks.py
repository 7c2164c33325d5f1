"""Axis labels at cell centres (i + 0.5), thinned to what the axis can show at its current size.

Re-thinned whenever the view is resized or zoomed, so labels never pile on each other. For numbered
rows and columns (positions, model dimensions); token names use gui.token_axis.TokenAxis.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QApplication

POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)   # tick steps for model dimensions
ROUND_STEPS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)        # tick steps for positions and tokens


class FittedTicks:
    """Numbered labels on one side of a plot, re-thinned on every resize and zoom."""

    def __init__(self, plot: pg.PlotItem, side: str, pixels_per_label: float,
                 steps: tuple[int, ...] = ROUND_STEPS) -> None:
        self.plot, self.side, self.pixels, self.steps = plot, side, pixels_per_label, steps
        self.axis = plot.getAxis(side)
        self.axis.setStyle(hideOverlappingLabels=False)  # the first cell's label sits at the very edge
        self.labels: list[str] = []
        plot.vb.sigResized.connect(self.fit)
        plot.vb.sigRangeChanged.connect(self.fit)

    def set_labels(self, labels) -> None:
        self.labels = list(labels)
        if self.side in ("left", "right"):
            self._fit_width()
        self.fit()

    def _fit_width(self) -> None:
        # pyqtgraph drops any label wider than the axis and widens the axis only on a later
        # layout pass, so an export made right after a new sentence would miss the long labels.
        metrics = QFontMetricsF(self.axis.style.get("tickFont") or QApplication.font())
        text = max((metrics.horizontalAdvance(label) for label in self.labels), default=0.0)
        title = metrics.height() + 6 if self.axis.label.isVisible() else 0
        self.axis.setWidth(int(np.ceil(text + title + 14)))

    def fit(self, *_) -> None:
        vertical = self.side in ("left", "right")
        view = self.plot.vb
        length_px = view.height() if vertical else view.width()
        span = view.viewRange()[1 if vertical else 0]
        cells_per_px = (span[1] - span[0]) / max(length_px, 1.0)
        needed = self.pixels * cells_per_px
        step = next((s for s in self.steps if s >= needed), self.steps[-1])
        self.axis.setTicks([[(i + 0.5, self.labels[i]) for i in range(0, len(self.labels), step)], []])


def numbers(count: int) -> list[str]:
    return [str(i) for i in range(count)]
