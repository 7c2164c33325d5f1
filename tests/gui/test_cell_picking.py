"""gui.cell_picking: the cell under the mouse comes from pyqtgraph's own mapping into data coordinates."""
from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtCore import QPointF

from gui.cell_picking import cell_of, cell_under, row_under


@pytest.fixture
def view(show):
    return show(pg.GraphicsLayoutWidget(), 400, 300)


@pytest.fixture
def plot(view, qtbot):
    item = view.addPlot()
    item.invertY(True)
    item.setRange(xRange=(0, 5), yRange=(0, 3), padding=0)
    qtbot.wait(20)   # laid out: the view box has its size
    return item


def scene_point(plot, x, y):
    return plot.vb.mapViewToScene(QPointF(x, y))


def test_cell_of_floors_each_coordinate_and_refuses_points_outside():
    assert cell_of(QPointF(2.99, 0.01), 3, 5) == (0, 2)
    assert cell_of(QPointF(4.5, 2.5), 3, 5) == (2, 4)
    assert cell_of(QPointF(-0.01, 1.0), 3, 5) is None
    assert cell_of(QPointF(1.0, 3.0), 3, 5) is None


def test_cell_under_a_scene_point_is_the_data_cell_there(plot):
    assert cell_under(plot, scene_point(plot, 3.5, 1.5), 3, 5) == (1, 3)
    assert cell_under(plot, scene_point(plot, 0.2, 2.8), 3, 5) == (2, 0)   # y down: row 2 at the bottom
    left_axis = plot.getAxis("left").sceneBoundingRect().center()
    assert cell_under(plot, left_axis, 3, 5) is None                        # outside the view box


def test_row_under_takes_the_whole_row_labels_included(plot):
    y = scene_point(plot, 0, 1.5).y()
    left_axis_x = plot.getAxis("left").sceneBoundingRect().center().x()
    assert row_under(plot, QPointF(left_axis_x, y), 3) == 1
    assert row_under(plot, scene_point(plot, 4.9, 0.5), 3) == 0
    assert row_under(plot, QPointF(-50, y), 3) is None
