"""A scroll area whose content fills the viewport, scrolling only when the viewport is shorter than it needs.

(widgetResizable=True sizes the content by its word-wrapped height-for-width, taller than needed.)
The content is fitted again whenever its layout changes (switches added or wrapped into more rows), and
its least height counts the lines its word-wrapped labels take at the width it gets.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QFrame, QScrollArea


class FillScrollArea(QScrollArea):
    def __init__(self) -> None:
        super().__init__()
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def setWidget(self, widget) -> None:  # noqa: N802 (Qt's name)
        super().setWidget(widget)
        widget.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802
        if watched is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            self._fit()
        return super().eventFilter(watched, event)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        content = self.widget()
        if content is None:
            return
        width, room = self.viewport().width(), self.viewport().height()
        if _least_height(content, width) > room:   # it will scroll: the bar takes some of the width
            width -= self.verticalScrollBar().sizeHint().width()
        content.resize(width, max(room, _least_height(content, width)))


def _least_height(content, width: int) -> int:
    """The least height the content needs at `width`: word-wrapped labels count the lines they wrap to."""
    layout = content.layout()
    if layout is not None and layout.hasHeightForWidth():
        return max(content.minimumSizeHint().height(), layout.totalMinimumHeightForWidth(width))
    return content.minimumSizeHint().height()
