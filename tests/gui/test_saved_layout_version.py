"""A layout saved before the current default arrangement (an older STATE_VERSION) is not restored over it;
one saved by this version is."""
from __future__ import annotations

from gui.main_window import STATE_VERSION

ONE_GROUP_VERSION = 2   # the version windows saved their layout with while the default was one tab group


def one_tab_group(window) -> None:
    """The arrangement before the two-group default: every dock a tab beside Attention."""
    attention = window.docks["attention"]
    for name, dock in window.docks.items():
        if name != "attention":
            window.tabifyDockWidget(attention, dock)


def shares_a_tab_group(window, a: str, b: str) -> bool:
    return window.docks[b] in window.tabifiedDockWidgets(window.docks[a])


def test_a_layout_saved_by_an_older_version_gives_the_default_arrangement(make_window, settings):
    first = make_window()
    one_tab_group(first)
    assert shares_a_tab_group(first, "attention", "next_token")
    settings.setValue("window/state", first.saveState(ONE_GROUP_VERSION))
    window = make_window()
    assert not shares_a_tab_group(window, "attention", "next_token")   # two groups: the default
    assert shares_a_tab_group(window, "attention", "positions")


def test_a_layout_saved_by_this_version_is_restored(make_window, settings):
    first = make_window()
    one_tab_group(first)
    settings.setValue("window/state", first.saveState(STATE_VERSION))
    window = make_window()
    assert shares_a_tab_group(window, "attention", "next_token")
