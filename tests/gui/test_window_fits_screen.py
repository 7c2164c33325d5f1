"""The window fits a 1280×800 screen: its first size, its default layout, its tab titles and no panel
whose minimum height grows with the sentence (a panel that did pushed the window past the screen)."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QRect, QSize
from PySide6.QtWidgets import QScrollArea, QTabBar

from gui.main_window import first_window_size
from tests.gui.qt_helpers import type_text

SMALL_SCREEN = QSize(1152, 752)   # the first window on a 1280×800 screen
SHORT = "The cat sat."
LONG = "The cat sat on the mat because it was tired, and the dog slept by the door. 订单成交，订单取消，查询订单。"


def test_the_first_window_fits_the_screen_it_opens_on():
    assert first_window_size(QRect(0, 0, 1280, 800)) == SMALL_SCREEN
    assert first_window_size(QRect(0, 0, 2560, 1440)) == QSize(1500, 950)   # a big screen: the usual size
    assert first_window_size(QRect(0, 30, 1366, 738)).height() < 738 - 30   # a title bar's room left


def window_at(make_window, size: QSize):
    window = make_window()
    window.resize(size)
    window.place_default_layout()   # View → Reset layout at this size
    return window


def test_the_default_layout_fits_a_1280_by_800_screen(qtbot, make_window):
    window = window_at(make_window, SMALL_SCREEN)
    type_text(qtbot, window, "我喜欢学习机器学习。")
    hint = window.minimumSizeHint()
    assert hint.width() <= SMALL_SCREEN.width() and hint.height() <= SMALL_SCREEN.height()
    assert window.size() == SMALL_SCREEN


def visible_tab_bars(window) -> list[QTabBar]:
    return [bar for bar in window.findChildren(QTabBar) if bar.isVisible() and bar.count() > 1]


def test_every_tab_title_is_whole_and_unique_at_the_default_layout_of_a_small_screen(qtbot, make_window):
    window = window_at(make_window, SMALL_SCREEN)
    qtbot.waitUntil(lambda: len(visible_tab_bars(window)) >= 2)
    titles = []
    for bar in visible_tab_bars(window):
        assert bar.elideMode().name == "ElideNone"
        last = bar.tabRect(bar.count() - 1)
        assert last.right() <= bar.width(), f"tabs scroll out of their bar: {bar.tabText(bar.count() - 1)}"
        for i in range(bar.count()):
            text_width = bar.fontMetrics().horizontalAdvance(bar.tabText(i))
            assert bar.tabRect(i).width() > text_width, f"the tab {bar.tabText(i)!r} is shortened"
            titles.append(bar.tabText(i))
    assert len(titles) == len(set(titles)) == len(window.docks) - 1   # every dock but Tokens is a tab


def chips_viewport_bottom(window) -> float:
    chips = window.panel("tokens").chips
    area = next(a for a in window.panel("tokens").findChildren(QScrollArea) if a.widget().isAncestorOf(chips))
    return area.viewport().height()


@pytest.mark.parametrize("text", ["我喜欢学习机器学习。", "The cat sat on the mat because it was tired and the dog slept."])
def test_the_tokens_dock_shows_two_whole_rows_of_chips_at_the_default_layout(qtbot, make_window, text):
    window = window_at(make_window, SMALL_SCREEN)
    type_text(qtbot, window, text)
    qtbot.wait(50)
    chips = window.panel("tokens").chips
    rows = sorted({round(chips.chip_rect(i).top()) for i in range(chips.chip_count())})
    assert len(rows) >= 2, "the sentence should take two rows of chips"
    second_row_bottom = max(chips.chip_rect(i).bottom() for i in range(chips.chip_count())
                            if round(chips.chip_rect(i).top()) == rows[1])
    assert second_row_bottom <= chips_viewport_bottom(window)


def test_no_panel_grows_the_window_with_the_sentence(qtbot, make_window):
    """Every panel on screen in turn, a short then a long sentence: the minimum heights stay put."""
    window = window_at(make_window, SMALL_SCREEN)
    for name, dock in window.docks.items():
        dock.raise_()
        type_text(qtbot, window, SHORT)
        short_dock = dock.minimumSizeHint().height()
        type_text(qtbot, window, LONG)
        assert window.controller.trace.n_tokens > 50
        panel = window.panel(name)
        if name == "occlusion":   # its strips fill in when the worker's answer arrives
            qtbot.waitUntil(lambda: panel.result is not None and len(panel.result.input_ids) > 40, timeout=30000)
        qtbot.wait(30)
        assert dock.minimumSizeHint().height() <= short_dock + 10, name
        assert window.minimumSizeHint().height() <= SMALL_SCREEN.height(), name
        assert window.size() == SMALL_SCREEN, name
        for first in ("attention", "next_token"):   # back behind its tab: a long occlusion run per sentence is slow
            window.docks[first].raise_()
