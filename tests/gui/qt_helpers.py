"""Helpers the Qt tests share: wait for a window to settle, type into it, hover over a widget."""
from __future__ import annotations


def settled(window, text: str) -> bool:
    """The window's controller has analysed exactly `text` and has nothing under way; then every panel
    draws what was posted to it (MainWindow.flush_redraws), so tests read what the panels show."""
    c = window.controller
    if c.trace is not None and c.trace.text == text and not c.busy():
        window.flush_redraws()
        return True
    return False


def type_text(qtbot, window, text: str, timeout: int = 20000) -> None:
    window.sentence_bar.setText(text)   # keyClicks cannot type CJK; setText goes through the same signal
    qtbot.waitUntil(lambda: settled(window, text), timeout=timeout)


def hover(widget, pos) -> None:
    """Deliver a mouse move to `widget` at `pos` directly (QTest's mouseMove drops moves now and then offscreen).

    pyqtgraph's scenes ignore a move that comes within 1/mouseRateLimit s (10 ms) of the last one,
    so wait past that first: two quick hovers in a test must both arrive.
    """
    from PySide6.QtCore import QEvent, QPointF, Qt
    from PySide6.QtGui import QMouseEvent
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    QTest.qWait(30)

    local = QPointF(pos)
    event = QMouseEvent(QEvent.Type.MouseMove, local, QPointF(widget.mapToGlobal(local)),
                        Qt.MouseButton.NoButton, Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, event)


def front(qtbot, window, name: str):
    """Show and raise a panel's dock so it is on screen, and wait until it shows the controller's trace."""
    window.docks[name].show()
    window.docks[name].raise_()
    panel = window.panel(name)
    qtbot.waitUntil(lambda: panel.trace is window.controller.trace, timeout=10000)
    return panel


def run_jobs_here(panel, runner) -> None:
    """Stand in for the controller: run each experiment job a panel asks for at once, on this thread."""
    def run(job):
        try:
            result = job.fn(runner)
        except ValueError as exc:
            job.on_error(str(exc))
        else:
            job.on_done(result)
    panel.sigRunExperiment.connect(run)
