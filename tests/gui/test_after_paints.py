"""after_pending_paints runs its call after the repaint already asked for (a zero timer runs before it)."""
from __future__ import annotations

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QWidget

from gui.after_paints import after_pending_paints


class Painted(QWidget):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def paintEvent(self, event) -> None:  # noqa: N802
        self.log.append("paint")


def test_the_call_comes_after_the_paint_asked_for_before_it(qtbot):
    log: list[str] = []
    widget = Painted(log)
    qtbot.addWidget(widget)
    widget.resize(120, 80)
    widget.show()
    qtbot.waitExposed(widget)
    qtbot.waitUntil(lambda: "paint" in log)
    log.clear()
    widget.update()
    QTimer.singleShot(0, lambda: log.append("zero timer"))
    after_pending_paints(widget, lambda: log.append("call"))
    qtbot.waitUntil(lambda: "call" in log)
    assert log.index("zero timer") < log.index("paint") < log.index("call")


def test_no_call_once_its_parent_is_gone(qtbot):
    calls: list[int] = []
    parent = QObject()
    after_pending_paints(parent, lambda: calls.append(1))
    parent.deleteLater()
    qtbot.wait(50)
    assert calls == []
