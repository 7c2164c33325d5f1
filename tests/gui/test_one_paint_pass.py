"""A frame whose panels changed several plots paints the window once (gui.panels.base.paint_views_together):
each graphics scene takes its changes in from an event it posts itself, then has the window painted at
once, so without it every changed plot cost a paint pass of its own. Counts passes, never times."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QHBoxLayout, QWidget

from gui.panels.base import Panel


class TwoPlotsPanel(Panel):
    """Draws a trace's two numbers as two curves, each in a plot of its own."""
    object_name = "two_plots"

    def __init__(self) -> None:
        super().__init__()
        content = QWidget()
        row = QHBoxLayout(content)
        self.views = [pg.PlotWidget(), pg.PlotWidget()]
        self.curves = [view.plot() for view in self.views]
        for view in self.views:
            view.setRange(xRange=(0, 9), yRange=(-10, 30), padding=0)   # fixed, as the app's heatmaps
            row.addWidget(view)
        self.set_content(content)
        self.refresh()

    def draw(self) -> None:
        for curve, slope in zip(self.curves, self.trace.slopes):
            curve.setData(np.arange(10.0), slope * np.arange(10.0))

    def figures(self):
        return []


class PassLog(QObject):
    """On the window: counts its repaint passes; on each plot: the pass it was painted in."""

    def __init__(self, window: QWidget, views) -> None:
        super().__init__()
        self.passes = 0
        self.painted_in: dict[int, list[int]] = {index: [] for index in range(len(views))}
        self._viewports = {view.viewport(): index for view, index in zip(views, range(len(views)))}
        window.installEventFilter(self)
        for viewport in self._viewports:
            viewport.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.UpdateRequest:
            self.passes += 1
        elif event.type() == QEvent.Type.Paint and watched in self._viewports:
            self.painted_in[self._viewports[watched]].append(self.passes)
        return False


def test_two_plots_changed_in_one_frame_paint_in_the_same_pass(qtbot):
    panel = TwoPlotsPanel()
    qtbot.addWidget(panel)
    panel.resize(600, 300)
    panel.show()
    qtbot.waitExposed(panel)
    panel.post_trace(SimpleNamespace(slopes=(1.0, 2.0), fields=None), panel.selection)
    panel.flush()
    log = PassLog(panel.window(), panel.views)
    quiet_since = [log.passes, 0]

    def quiet() -> bool:   # no repaint of the window for a while: the first picture is done
        quiet_since[:] = [log.passes, quiet_since[1] + 1 if log.passes == quiet_since[0] else 0]
        return quiet_since[1] >= 5
    qtbot.waitUntil(quiet, timeout=10000)

    log.painted_in = {index: [] for index in log.painted_in}
    panel.post_trace(SimpleNamespace(slopes=(3.0, -1.0), fields=None), panel.selection)   # drawn at the next frame
    qtbot.waitUntil(lambda: all(log.painted_in.values()))
    assert log.painted_in[0][0] == log.painted_in[1][0]   # both plots' new picture in the same pass of the window
