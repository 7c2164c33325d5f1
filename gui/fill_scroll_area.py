"""A scroll area whose content fills the viewport, scrolling only when the viewport is shorter than it needs.

(widgetResizable=True sizes the content by its word-wrapped height-for-width, taller than needed.)
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QScrollArea


class FillScrollArea(QScrollArea):
    def __init__(self) -> None:
        super().__init__()
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        content = self.widget()
        if content is None:
            return
        height = max(self.viewport().height(), content.minimumSizeHint().height())
        width = self.viewport().width() - (self.verticalScrollBar().sizeHint().width()
                                           if height > self.viewport().height() else 0)
        content.resize(width, height)
