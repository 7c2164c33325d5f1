"""The status bar's busy label and Cancel button keep their place: a run changes their text and
enabled state, never their visibility (showing and hiding them re-laid out the status bar per keystroke);
and only a run that lasts says so (at typing speed "running…" flickered on every key)."""
from __future__ import annotations

import time

from PySide6.QtCore import QEvent, QObject

from gui.main_window import BUSY_DELAY_MS, BUSY_TEXT
from tests.gui.qt_helpers import type_text


class ShowHideCounter(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched, event):  # noqa: N802 (Qt's name)
        if event.type() in (QEvent.Type.Show, QEvent.Type.Hide):
            self.count += 1
        return False


def test_runs_never_show_or_hide_the_busy_widgets(make_window, qtbot):
    window = make_window()
    counter = ShowHideCounter()
    for widget in (window.busy_label, window.cancel_button):
        widget.installEventFilter(counter)
    busy_states = []
    window.controller.sigBusy.connect(lambda busy: busy_states.append(
        (busy, window.busy_label.text(), window.cancel_button.isEnabled())))
    for text in ("the cat", "the cat sat", "订单成交"):
        type_text(qtbot, window, text)
    assert counter.count == 0
    assert window.busy_label.isVisible() and window.cancel_button.isVisible()
    assert busy_states[-1] == (False, "", False)              # after the runs: blank, nothing to cancel


def test_a_run_says_running_and_offers_cancel_once_it_has_lasted_the_delay(make_window, qtbot, monkeypatch):
    window = make_window()
    c = window.controller
    monkeypatch.setattr(c, "busy", lambda: True)   # a run under way (its length is the test's to choose)
    started = time.monotonic()
    c.sigBusy.emit(True)
    assert (window.busy_label.text(), window.cancel_button.isEnabled()) == ("", False)
    qtbot.waitUntil(lambda: window.busy_label.text() == BUSY_TEXT, timeout=5000)
    assert window.cancel_button.isEnabled()
    assert time.monotonic() - started >= BUSY_DELAY_MS / 1000 * 0.9   # (timers may fire a little early)
    monkeypatch.setattr(c, "busy", lambda: False)
    c.sigBusy.emit(False)
    assert (window.busy_label.text(), window.cancel_button.isEnabled()) == ("", False)

