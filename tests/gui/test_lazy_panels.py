"""Panels behind another tab are built only when first shown (or asked for), and then show the
current trace and selection at once."""
from __future__ import annotations

from gui.main_window import STATE_VERSION
from gui.panels.base import Panel
from tests.gui.qt_helpers import type_text


def built(window, name: str) -> bool:
    return isinstance(window.docks[name].widget(), Panel)


def test_a_hidden_panel_is_built_on_first_show_with_the_current_trace(make_window, qtbot):
    window = make_window()
    assert built(window, "tokens") and built(window, "attention")   # the default layout shows these
    assert not built(window, "positions")                           # a tab behind Attention
    type_text(qtbot, window, "the cat sat on the mat")
    window.controller.select({"query": 2})
    assert not built(window, "positions")
    window.docks["positions"].raise_()
    qtbot.waitUntil(lambda: built(window, "positions"), timeout=5000)
    panel = window.docks["positions"].widget()
    window.flush_redraws()
    assert panel.trace is window.controller.trace
    assert panel.selection == window.controller.selection and panel.selection.query == 2
    assert not panel.showing_empty_state()


def test_asking_for_a_panel_builds_it_showing_the_current_trace(make_window, qtbot):
    window = make_window()
    type_text(qtbot, window, "订单成交")
    assert not built(window, "moe")
    panel = window.panel("moe")
    assert panel is window.docks["moe"].widget()
    assert panel.trace is window.controller.trace
    assert window.panel("moe") is panel   # built once
    assert window.panel("no_such_panel") is None


def test_dock_names_stay_for_the_saved_layout_before_panels_are_built(make_window):
    window = make_window()
    assert {dock.objectName() for dock in window.docks.values()} >= {"positions", "moe", "step", "parity"}
    assert not built(window, "parity")
    assert window.restoreState(window.saveState(STATE_VERSION), STATE_VERSION)
