"""The MoE panel with 8, 32 and 64 experts at a dock's size: router columns keep a visible width (the heatmaps
scroll sideways instead), numbers under columns and bars never crowd, expert switches wrap without being
squeezed, the load bars keep their height, and a thin bar says its numbers on hover."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QFontMetricsF

from core.runners import NumpyRunner
from core.session import analyse
from gui.fonts import ui_font
from gui.panels.moe_panel import MoePanel
from gui.router_heatmaps import MIN_EXPERT_PX
from gui.selection import Selection
from tests.gui.qt_helpers import hover

SENTENCE = "The cat sat on the mat because it was tired."
SHAPES = {8: dict(num_local_experts=8, num_experts_per_tok=2),
          32: dict(num_local_experts=32, num_experts_per_tok=4, intermediate_size=32),
          64: dict(num_local_experts=64, num_experts_per_tok=8, intermediate_size=16)}
DOCK = (570, 470)   # the MoE dock at 1280×800 (the default layout): the tightest room it gets


@pytest.fixture(scope="module", params=sorted(SHAPES), ids=lambda n: f"{n}experts")
def trace(request, make_bundle):
    return analyse(NumpyRunner(make_bundle(**SHAPES[request.param])), SENTENCE)


@pytest.fixture
def panel(show, trace, qtbot):
    panel = show(MoePanel(), *DOCK)
    panel.set_trace(trace)
    qtbot.wait(50)
    return panel


def tick_pixels(axis, column_px: float, offset: float) -> list[tuple[float, str]]:
    """(centre in pixels, text) of the numbers set under a plot."""
    ticks = axis._tickLevels[0]
    return [((value - offset) * column_px, text) for value, text in ticks]


def assert_apart(ticks: list[tuple[float, str]]) -> None:
    metrics = QFontMetricsF(ui_font(9))
    for (a, text_a), (b, text_b) in zip(ticks, ticks[1:]):
        assert b - a >= (metrics.horizontalAdvance(text_a) + metrics.horizontalAdvance(text_b)) / 2, (text_a, text_b)


def test_router_columns_keep_their_width_and_scroll_sideways(panel, trace):
    router, n = panel.router, trace.config.num_local_experts
    assert router.column_px() >= MIN_EXPERT_PX - 0.5
    if 2 * n * MIN_EXPERT_PX > router.scroll.viewport().width():
        assert router.scroll.horizontalScrollBar().maximum() > 0


def test_numbers_under_the_router_columns_never_crowd(panel, trace):
    router = panel.router
    ticks = tick_pixels(router.probs_plot.getAxis("bottom"), router.column_px(), 0.5)
    assert ticks[0][1] == "0" and len(ticks) >= min(4, trace.config.num_local_experts)
    assert_apart(ticks)


def test_numbers_under_the_load_bars_never_crowd(panel, trace):
    load = panel.load
    n = trace.config.num_local_experts
    ticks = tick_pixels(load.plot.getAxis("bottom"), load.plot.vb.width() / n, 0)
    assert len(ticks) >= min(4, n)
    assert_apart(ticks)


def test_expert_switches_wrap_unsqueezed_and_apart(panel, trace):
    switches = panel.load.switches
    assert len(switches) == trace.config.num_local_experts
    for button in switches:
        assert button.height() >= button.minimumSizeHint().height()
        assert button.width() >= button.fontMetrics().horizontalAdvance(button.text())
        assert button.geometry().right() <= panel.load.width()   # not cut at the column's edge
    rects = [button.geometry() for button in switches]
    for i, a in enumerate(rects):
        assert not any(a.intersects(b) for b in rects[i + 1:])
    assert panel.load.plot.vb.height() >= 100   # the bars keep a readable height: the column scrolls instead


def test_hovering_a_bar_gives_its_experts_numbers(panel, trace, qtbot):
    load, expert = panel.load, trace.config.num_local_experts - 1
    counts = np.bincount(trace.layers[0].expert_ids.reshape(-1), minlength=expert + 1)
    at = load.plots.mapFromScene(load.plot.vb.mapViewToScene(QPointF(expert, 0.001)))
    hover(load.plots.viewport(), at)
    qtbot.waitUntil(lambda: load.plots.toolTip().startswith(f"Expert {expert} of layer 0"), timeout=5000)
    assert f": {counts[expert]} of {trace.layers[0].expert_ids.size} top-" in load.plots.toolTip()


def test_the_router_page_is_wide_enough_for_every_column(panel, trace):
    page = next(f for f in panel.figures() if f.name == "moe_router_probs").page_size()
    assert page.width() >= panel.router.least_width(trace.config.num_local_experts)


def test_a_32_layer_model_picks_its_layer_from_a_list_that_fits_the_dock(show, make_bundle, qtbot):
    trace = analyse(NumpyRunner(make_bundle(num_local_experts=8, num_experts_per_tok=2, num_hidden_layers=32,
                                            hidden_size=32, intermediate_size=16)), SENTENCE)
    panel = show(MoePanel(), *DOCK)
    panel.set_trace(trace)
    assert panel.minimumSizeHint().width() <= DOCK[0]   # 32 "layer N" buttons would need ~2,400 px
    assert panel.layer_box.isVisible() and panel.layer_box.count() == 32 and not panel.layer_buttons.buttons()
    with qtbot.waitSignal(panel.sigSelect, timeout=5000) as asked:
        panel.layer_box.activated.emit(20)   # as a user's pick does
    assert asked.args == [{"layer": 20}]
    panel.set_selection(Selection(layer=27))
    assert panel.layer_box.currentIndex() == 27 and panel.routing.layer == 27



def test_mid_layout_the_least_width_is_never_negative(show, make_bundle, qtbot):
    """Built hidden and then shown, the router's plots were for a moment narrower than the cells laid out
    in them: the least width asked for came out negative (Qt: "Negative sizes are not possible")."""
    trace = analyse(NumpyRunner(make_bundle(**SHAPES[8])), SENTENCE)
    panel = show(MoePanel(), 1400, 470)
    panel.set_trace(trace)
    qtbot.wait(50)
    router, n = panel.router, trace.config.num_local_experts
    assert min(router.probs_plot.vb.width(), router.weights_plot.vb.width()) > n * MIN_EXPERT_PX + 50
    router.plots.width = lambda: 50   # the holder's width at that moment, its cells laid out wider
    assert router.least_width(n) == 0
