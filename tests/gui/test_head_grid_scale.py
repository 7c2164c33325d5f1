"""The head grid at a real model's scale (SmolLM2-135M's 30 layers × 9 heads, a small width): thumbnails keep
a size a pattern shows at, the grid scrolls instead, its names never overlap, a head picked elsewhere is
scrolled into view, and clicks, hovers and corner boxes still work inside the scroll area."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

from core.runners import NumpyRunner
from core.session import analyse
from gui.head_grid import GAP, MIN_THUMBNAIL_PX, HeadGrid
from gui.panels.attention_panel import AttentionPanel
from gui.selection import Selection
from tests.gui.qt_helpers import hover

SMOLLM2_SHAPE = dict(architecture="LlamaForCausalLM", num_local_experts=0, num_experts_per_tok=0,
                     num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, hidden_size=72,
                     intermediate_size=64)
SENTENCE = "The cat sat on the mat because it was tired."


@pytest.fixture(scope="module")
def big_trace(make_bundle):
    return analyse(NumpyRunner(make_bundle(**SMOLLM2_SHAPE)), SENTENCE)


@pytest.fixture
def panel(show, big_trace, qtbot):
    panel = show(AttentionPanel(), 1000, 600)   # the grid gets ~a third of the width, ~a third of the height
    panel.set_trace(big_trace)
    qtbot.wait(50)
    return panel


def visible(panel: AttentionPanel) -> QRect:
    """The part of the grid the scroll area shows, in the grid's own pixels."""
    area = panel.grid_area
    return QRect(panel.grid.mapFrom(area.viewport(), area.viewport().rect().topLeft()), area.viewport().size())


def thumbnail_rects(grid: HeadGrid) -> list[QRectF]:
    return [image.sceneBoundingRect() for row in grid.images for image in row]


def test_thumbnails_keep_their_minimum_size_and_the_grid_scrolls_instead(panel):
    grid, area = panel.grid, panel.grid_area
    assert grid.px_per_unit >= MIN_THUMBNAIL_PX - 0.5
    for layer, head in ((0, 0), (29, 8)):
        rect = grid.head_rect(layer, head)
        assert min(rect.width(), rect.height()) >= MIN_THUMBNAIL_PX - 1
    assert area.verticalScrollBar().maximum() > 0        # 30 rows do not fit: it scrolls
    assert grid.height() >= 30 * (1 + GAP) * MIN_THUMBNAIL_PX


def test_a_small_model_fills_the_area_without_scrolling(show, analysed):
    panel = show(AttentionPanel(), 1000, 600)
    panel.set_trace(analysed(SENTENCE))   # 2 layers × 4 heads
    assert panel.grid_area.verticalScrollBar().maximum() == 0 and panel.grid_area.horizontalScrollBar().maximum() == 0
    assert panel.grid.px_per_unit >= MIN_THUMBNAIL_PX


def test_a_head_selected_elsewhere_is_scrolled_into_view_and_its_box_and_hover_work(panel, qtbot):
    grid = panel.grid
    assert not visible(panel).contains(grid.head_rect(25, 7))
    panel.set_selection(Selection(layer=25, head=7))   # as when another panel selects it
    qtbot.waitUntil(lambda: visible(panel).contains(grid.head_rect(25, 7)), timeout=5000)

    hover(grid.viewport(), grid.head_point(25, 7))
    qtbot.waitUntil(lambda: grid.toolTip().startswith("L25 H7"), timeout=5000)
    with qtbot.waitSignal(grid.sigHeadToggled, timeout=5000) as toggled:
        qtbot.mouseClick(grid.viewport(), Qt.MouseButton.LeftButton, pos=grid.switch_point(25, 7))
    assert toggled.args == [25, 7]
    with qtbot.waitSignal(grid.sigHeadClicked, timeout=5000) as clicked:
        qtbot.mouseClick(grid.viewport(), Qt.MouseButton.LeftButton, pos=grid.head_point(25, 6))
    assert clicked.args == [25, 6]


def test_the_wheel_over_the_thumbnails_scrolls_the_grid(panel):
    grid, bar = panel.grid, panel.grid_area.verticalScrollBar()
    at = QPointF(grid.head_point(0, 1))
    wheel = QWheelEvent(at, QPointF(grid.viewport().mapToGlobal(at.toPoint())), QPoint(0, 0), QPoint(0, -120),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(grid.viewport(), wheel)
    assert bar.value() > 0


def test_a_redraw_keeps_where_the_user_scrolled(panel, big_trace, qtbot):
    bar = panel.grid_area.verticalScrollBar()
    bar.setValue(bar.maximum())
    panel.set_trace(big_trace)                 # a new run, the same selection (layer 0)
    panel.set_selection(Selection(layer=0, head=0, query=3))   # a new query token: not a new head
    qtbot.wait(50)
    assert bar.value() == bar.maximum()


@pytest.mark.parametrize("scrolled", [False, True])
def test_names_never_overlap_each_other(panel, qtbot, scrolled):
    if scrolled:   # the names are pinned along the top and left of the part in view
        panel.set_selection(Selection(layer=20, head=8))
        qtbot.waitUntil(lambda: visible(panel).contains(panel.grid.head_rect(20, 8)), timeout=5000)
        assert panel.grid_area.verticalScrollBar().value() > 0
    rects = panel.grid.name_rects()
    assert len(rects) >= 10   # the head names and the layer names beside them
    for i, a in enumerate(rects):
        assert not any(a.intersects(b) for b in rects[i + 1:]), a


def test_unscrolled_names_sit_beside_the_thumbnails_not_on_them(panel):
    thumbnails = thumbnail_rects(panel.grid)
    for name in panel.grid.name_rects():
        assert not any(name.intersects(t) for t in thumbnails), name


def test_a_grid_too_small_for_every_name_shows_every_second_or_fourth(big_trace, show):
    grid = show(HeadGrid(), 150, 300)   # outside a scroll area (a page of many heads): thumbnails ~8 px
    grid.show_heads(big_trace, panel_scale(big_trace))
    assert grid.px_per_unit < 10
    shown = [i for i, name in enumerate(grid.layer_names) if name.isVisible()]
    assert 3 <= len(shown) < 30 and len({b - a for a, b in zip(shown, shown[1:])}) == 1   # every n-th
    rects = grid.name_rects()
    for i, a in enumerate(rects):
        assert not any(a.intersects(b) for b in rects[i + 1:]), a


def panel_scale(trace):
    from core import attention_view as av

    return av.attention_scale(av.head_maxima(trace), "shared")


def test_an_export_shows_the_whole_grid_and_leaves_the_area_scrolled_where_it_was(panel, qtbot):
    from gui import export
    from gui.figure_pages import laid_out_size

    panel.set_selection(Selection(layer=22, head=4))
    bar = panel.grid_area.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.value() > 0, timeout=5000)
    scrolled = bar.value()
    figure = next(f for f in panel.figures() if f.name == "attention_grid")
    assert laid_out_size(figure).height() >= 30 * (1 + GAP) * MIN_THUMBNAIL_PX   # every row on the page
    export.figure_files(figure, ["png"])
    qtbot.waitUntil(lambda: bar.value() == scrolled, timeout=5000)
    assert panel.grid.head_names[0].pos().y() > 0   # pinned again along the top of the part in view
