"""The status bar's busy label and Cancel button keep their place: a run changes their text and
enabled state, never their visibility (showing and hiding them re-laid out the status bar per keystroke)."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject

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
    assert (True, "running…", True) in busy_states            # while a run is under way: said, cancellable
    assert busy_states[-1] == (False, "", False)              # after it: blank, nothing to cancel
