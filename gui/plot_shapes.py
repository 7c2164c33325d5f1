"""Shapes and axes the Positions plots share: arrows, circles, fast wide lines, π ticks, plain number axes.

Everything is in data coordinates; the plots that draw arrows lock their aspect ratio.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QPen

BEFORE_PEN = pg.mkPen((110, 110, 110), width=2)
AFTER_COLOUR = (0, 114, 178)        # Okabe-Ito blue: the rotated vector
KEY_COLOUR = (213, 94, 0)           # Okabe-Ito vermillion: the contrast curve
TRAIL_BRUSH = pg.mkBrush(0, 114, 178, 70)
GUIDE_PEN = pg.mkPen((170, 170, 170), width=1, style=Qt.DashLine)
# Lines told apart at a glance, also by colour-blind readers: Okabe-Ito without its yellow (too pale on white),
# its orange (too near the vermillion) and its black (lost on the dark theme), then a purple seen on both.
DISTINCT_COLOURS = ((0, 114, 178), (213, 94, 0), (0, 158, 115), (204, 121, 167), (86, 180, 233), (128, 0, 128))
OTHER_COLOUR = (195, 195, 195)      # the lines behind the ones a figure names


def arrow_segments(tips: np.ndarray, origins: np.ndarray | None = None,
                   head: float = 0.15) -> tuple[np.ndarray, np.ndarray]:  # [N, 2] -> x, y for connect="pairs"
    """Shaft plus two barbs per arrow, in data coordinates (the plots lock the aspect ratio).

    Segment 0 of arrow j is origin -> tip, so x[6j+1], y[6j+1] is exactly the tip drawn.
    """
    tips = np.asarray(tips, np.float64).reshape(-1, 2)
    origins = np.zeros_like(tips) if origins is None else np.asarray(origins, np.float64).reshape(-1, 2)
    direction = tips - origins
    length = np.maximum(np.hypot(direction[:, 0], direction[:, 1]), 1e-12)[:, None]
    back = -direction / length * head  # [N, 2] a barb's length, pointing back along the shaft
    barbs = [back @ _rotation(a).T for a in (np.radians(25), -np.radians(25))]
    points = np.stack([origins, tips, tips, tips + barbs[0], tips, tips + barbs[1]], axis=1).reshape(-1, 2)
    return points[:, 0], points[:, 1]


def _rotation(angle: float) -> np.ndarray:  # -> [2, 2]
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s], [s, c]])


def line(plot: pg.PlotItem, pen: QPen, **options) -> pg.PlotDataItem:
    """A curve on `plot`. Wide antialiased polylines are slow to rasterise; drawn as separate
    segments they paint several times faster, which keeps a redraw within the debounce budget."""
    item = plot.plot(pen=pen, **options)
    item.curve.setSegmentedLineMode("on")
    return item


def circle(radius: float, centre=(0.0, 0.0), start: float = 0.0, sweep: float = 2 * np.pi,
           n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    t = start + np.linspace(0.0, sweep, n)
    return centre[0] + radius * np.cos(t), centre[1] + radius * np.sin(t)




def pi_ticks(axis: pg.AxisItem) -> None:
    names = ["0", "π/2", "π", "3π/2", "2π"]
    axis.setTicks([[(k * np.pi / 2, name) for k, name in enumerate(names)], []])



def plain_axes(plot: pg.PlotItem) -> pg.PlotItem:
    """No automatic SI prefixes: a user reading 0.2 off the axis must not see '200 (x0.001)'."""
    for side in ("left", "bottom"):
        plot.getAxis(side).enableAutoSIPrefix(False)
    return plot
