"""after_pending_paints(parent, fn): call fn once the repaints already asked for have been painted.

Qt posts a widget's repaint (QEvent.UpdateRequest) at low priority, so a QTimer.singleShot(0) is
delivered before it; a low-priority event posted after it is delivered after it. Work started from
inside a draw (the head-roles probe's ONNX session and runs) so waits for the picture that draw made,
instead of competing with it for the GIL and a core (at start-up, the first sentence's paint).
"""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt


class _Call(QObject):
    def __init__(self, parent: QObject, fn: Callable[[], None]) -> None:
        super().__init__(parent)
        self._fn = fn

    def customEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        self.deleteLater()
        self._fn()


def after_pending_paints(parent: QObject, fn: Callable[[], None]) -> None:
    """fn() on this thread after the paints pending now; never if parent is destroyed first."""
    QCoreApplication.postEvent(_Call(parent, fn), QEvent(QEvent.Type.User), Qt.EventPriority.LowEventPriority.value)
