"""Panels at the default layout of a 1280×800 screen: nothing they write is cut."""
from __future__ import annotations

from PySide6.QtCore import QSize

from tests.gui.qt_helpers import type_text

SMALL_SCREEN = QSize(1152, 752)   # the first window on a 1280×800 screen (gui.main_window.first_window_size)
CHINESE = "我喜欢学习机器学习。"


def shown_at_small_screen(qtbot, make_window, name: str):
    window = make_window()
    window.resize(SMALL_SCREEN)
    window.place_default_layout()
    window.docks[name].raise_()
    type_text(qtbot, window, CHINESE)
    qtbot.waitUntil(lambda: window.on_screen(window.panel(name)))
    window.flush_redraws()
    qtbot.wait(50)
    return window, window.panel(name)


def test_head_roles_column_titles_are_whole(qtbot, make_window):
    _, panel = shown_at_small_screen(qtbot, make_window, "head_roles")
    header = panel.table.horizontalHeader()
    metrics = header.fontMetrics()
    assert header.width() >= header.length(), "the columns scroll out of the table"
    for column in range(panel.table.columnCount()):
        title = panel.table.horizontalHeaderItem(column).text()
        widest = max(metrics.horizontalAdvance(line) for line in title.split("\n"))
        assert header.sectionSize(column) >= widest + 6, f"the column title {title!r} is cut"
