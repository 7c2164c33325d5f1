"""The MoE routing panel in the dock a 1280×800 screen gives it (the default layout of a 1152×752 first window):
both heatmaps numbered and every row shown named, the what-if at hand, its result brought into view."""
from __future__ import annotations

from PySide6.QtCore import QPoint

from core.runners import NumpyRunner
from core.session import analyse
from gui.heatmap import MIN_LABEL_CELL_PX
from gui.moe_whatif import BAR_ROW_PX
from gui.panels.moe_panel import MORE_ROWS_TEXT, WHATIF_TAG, MoePanel

SMALL_DOCK = (676, 346)   # the MoE dock of that layout, measured
CHINESE = "订单成交，订单取消。我们明天去北京。"


def test_a_small_dock_numbers_both_heatmaps_and_names_every_row_it_shows(show, analysed, qtbot):
    panel = show(MoePanel(), *SMALL_DOCK)
    trace = analysed(CHINESE)
    panel.set_trace(trace)
    qtbot.wait(50)
    router = panel.router
    widths = [plot.vb.width() / trace.config.num_local_experts for plot in (router.probs_plot, router.weights_plot)]
    assert min(widths) >= MIN_LABEL_CELL_PX[0], f"columns of {widths} px: too narrow for their numbers"
    first, last = router.visible_rows()
    assert first <= trace.n_tokens - 1 < last   # the selected (last) token is among them
    row_px = router.probs_plot.vb.height() / (last - first)
    axis = router.probs_plot.getAxis("left")
    assert row_px >= max(MIN_LABEL_CELL_PX[1], axis.legible_pitch()), f"rows of {row_px:.1f} px"
    low, high = router.probs_plot.vb.viewRange()[1]
    ((step, _),) = axis.tickValues(low, high, router.probs_plot.vb.height())
    assert step == 1, "rows on screen left unnamed"
    if last - first < trace.n_tokens:
        assert panel.hover.text().endswith(MORE_ROWS_TEXT)
    assert not panel.whatif.run_button.visibleRegion().isEmpty(), "the what-if's button is out of view"


def test_a_whatif_result_scrolls_into_a_short_dock_with_room_for_its_bars(show, bundle, qtbot):
    panel = show(MoePanel(), *SMALL_DOCK)
    runner = NumpyRunner(bundle)
    trace = analyse(runner, CHINESE)
    panel.set_trace(trace)
    with qtbot.waitSignal(panel.sigRequestVariant) as blocker:
        panel.request_whatif()
    panel.set_variant(WHATIF_TAG, analyse(runner, CHINESE, expert_override=blocker.args[1]["expert_override"]))
    qtbot.wait(50)
    viewport = panel.right.viewport()
    top = panel.whatif.result_widget.mapTo(viewport, QPoint(0, 0)).y()
    assert 0 <= top < viewport.height() // 3, f"the result starts {top} px down a {viewport.height()} px column"
    assert panel.whatif.plots.height() >= BAR_ROW_PX * len(panel.whatif.changes)


def test_the_router_figure_has_its_caption_on_the_page_not_on_a_grey_band(show, analysed):
    from PySide6.QtGui import QColor

    from gui.figure_pages import on_page

    panel = show(MoePanel(), *SMALL_DOCK)
    panel.set_trace(analysed(CHINESE))
    panel.flush()
    (figure,) = [f for f in panel.figures() if f.name == "moe_router_probs"]
    with on_page(figure) as page:
        caption = page.explanation
        image = page.grab().toImage()
        corner = caption.geometry().topLeft()
        assert caption.contentsMargins().left() > 0   # the text clear of the page's edge
    below = caption.geometry().bottom() + 2   # between the caption and the plots
    assert image.pixelColor(corner.x() + 2, corner.y() + 2) == QColor("white") == image.pixelColor(5, below)
    assert not page.autoFillBackground()   # back on screen: the window's own colour
