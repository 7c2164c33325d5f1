"""Which cell of a grid of unit squares is under the mouse, in pyqtgraph's own data coordinates.

Every picture that picks cells lays cell (row, col) out as the unit square [col, col+1) × [row, row+1)
in its data coordinates: heatmaps (through their ImageItem, see gui.heatmap.PickableImage), the
Next-token bars (one row per candidate) and the Positions small multiples (one cell per RoPE pair).
pyqtgraph maps the mouse into those coordinates (an item's event position, or ViewBox.mapSceneToView);
the cell is then the floor of each, checked against the grid's shape.
"""
from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import QPointF


def cell_of(point: QPointF, rows: int, cols: int) -> tuple[int, int] | None:  # data coordinates -> (row, col)
    row, col = math.floor(point.y()), math.floor(point.x())
    return (row, col) if 0 <= row < rows and 0 <= col < cols else None


def cell_under(plot: pg.PlotItem, scene_pos: QPointF, rows: int, cols: int) -> tuple[int, int] | None:
    """The cell under a scene point inside the plot's view box, or None."""
    if not plot.vb.sceneBoundingRect().contains(scene_pos):
        return None
    return cell_of(plot.vb.mapSceneToView(scene_pos), rows, cols)


def row_under(plot: pg.PlotItem, scene_pos: QPointF, rows: int) -> int | None:
    """The row under a scene point anywhere across the plot, its axis labels included (bar charts), or None."""
    if not plot.sceneBoundingRect().contains(scene_pos):
        return None
    cell = cell_of(QPointF(0.0, plot.vb.mapSceneToView(scene_pos).y()), rows, 1)
    return None if cell is None else cell[0]
