"""A deep model's head grid shows several rows of thumbnails, not a scroll box two rows high."""
from __future__ import annotations

from core.runners import NumpyRunner
from core.session import analyse
from gui.head_grid import MIN_THUMBNAIL_PX
from gui.panels.attention_panel import DEEP_GRID_ROWS, AttentionPanel


def test_a_deep_grid_gets_the_height_of_several_rows(show, make_bundle, analysed):
    panel = show(AttentionPanel(), 1300, 800)
    panel.set_trace(analysed("The cat sat on the mat."))
    panel.flush()
    shallow_share = panel.grid_area.height() / sum(panel._right.sizes())
    deep = make_bundle(seed=2, num_hidden_layers=12, num_attention_heads=4, num_key_value_heads=2)
    panel.set_trace(analyse(NumpyRunner(deep), "The cat sat on the mat."))
    panel.flush()
    area, grid = panel.grid_area, panel.grid
    assert area.height() / sum(panel._right.sizes()) > shallow_share
    row_px = grid.head_rect(1, 0).top() - grid.head_rect(0, 0).top()
    assert row_px >= MIN_THUMBNAIL_PX
    visible_rows = (area.viewport().height() - grid.head_rect(0, 0).top()) // row_px
    assert visible_rows >= DEEP_GRID_ROWS - 1   # whole rows in view, the last may be cut by the help line's wrap
