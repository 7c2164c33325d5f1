"""The router figure on its page: its colour bar named and as tall as the cells, the weights' axis showing
nothing (no bare tick marks), every row shown, and the page as high as its rows need (one token: a low page,
not one tall row)."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QStyleOptionGraphicsItem

from gui.figure_pages import laid_out_size, on_page
from gui.panels.moe_panel import MoePanel
from gui.router_heatmaps import COLOUR_BAR_NAME, PAGE_ROW_PX

SMALL_DOCK = (676, 346)


def router_figure(panel):
    panel.flush()
    return next(f for f in panel.figures() if f.name == "moe_router_probs")


def test_the_colour_bar_is_named_on_the_page_and_not_on_screen(show, analysed):
    panel = show(MoePanel(), *SMALL_DOCK)
    panel.set_trace(analysed("The cat sat on the mat."))
    axis = panel.router.colour_bar.axis
    with on_page(router_figure(panel)):
        assert axis.label.isVisible() and axis.labelText == COLOUR_BAR_NAME
    assert not axis.label.isVisible()   # the dock's narrow columns keep their width


def assert_bar_spans_the_cells(router):
    cells, bar = router.probs_plot.vb.sceneBoundingRect(), router.colour_bar.vb.sceneBoundingRect()
    assert abs(bar.top() - cells.top()) <= 1 and abs(bar.bottom() - cells.bottom()) <= 1, (bar, cells)


def test_the_colour_bar_is_as_tall_as_the_cells_on_screen_and_on_the_page(show, analysed, qtbot):
    panel = show(MoePanel(), *SMALL_DOCK)
    panel.set_trace(analysed("The cat sat on the mat."))
    qtbot.wait(20)
    assert_bar_spans_the_cells(panel.router)   # not reaching down beside the expert numbers
    with on_page(router_figure(panel)):
        assert_bar_spans_the_cells(panel.router)
    panel.resize(SMALL_DOCK[0], SMALL_DOCK[1] + 120)
    qtbot.wait(20)
    assert_bar_spans_the_cells(panel.router)


def inked_columns(axis) -> set[int]:
    """The pixel columns an axis item paints anything in (painted alone, on a transparent image)."""
    rect = axis.boundingRect().toAlignedRect()
    image = QImage(rect.width(), rect.height(), QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.translate(-rect.topLeft())
    axis.paint(painter, QStyleOptionGraphicsItem(), None)
    painter.end()
    return {x for x in range(image.width()) for y in range(image.height()) if image.pixelColor(x, y).alpha() > 0}


def test_the_weights_axis_draws_its_line_and_no_bare_tick_marks(show, analysed):
    panel = show(MoePanel(), *SMALL_DOCK)
    panel.set_trace(analysed("The cat sat on the mat."))
    with on_page(router_figure(panel)):
        columns = inked_columns(panel.router.weights_plot.getAxis("left"))
    assert len(columns) <= 1, f"tick marks beside the axis line: columns {sorted(columns)}"   # at most the line


def test_the_page_is_as_high_as_its_rows_and_shows_every_one(show, analysed):
    panel = show(MoePanel(), *SMALL_DOCK)
    heights = {}
    for text in ("The cat sat on the mat.", "The cat sat on the mat. The dog sat on the log, and the bird sang."):
        trace = analysed(text)
        panel.set_trace(trace)
        figure = router_figure(panel)
        heights[trace.n_tokens] = laid_out_size(figure).height()
        with on_page(figure):
            assert panel.router.visible_rows() == (0, trace.n_tokens)   # no window of rows on paper
    (few, low), (many, high) = sorted(heights.items())
    assert abs((high - low) - (many - few) * PAGE_ROW_PX) <= 1, heights
    panel.set_trace(analysed("a"))
    assert laid_out_size(router_figure(panel)).height() < 300   # was 560: one row stretched over a plot's height
