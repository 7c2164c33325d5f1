"""A word-wrapped label that keeps the height its lines take at its width.

A QLabel that wraps has a height for its width, but a splitter or a box squeezed below its content
reads only the label's minimum height (one line): the box then lays the label over the widget
above it (the Attention panel's grid help covered the last row of thumbnails at 1280 × 800).
WrappedLabel makes the wrapped height at its current width its minimum height.
"""
from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget


class WrappedLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setWordWrap(True)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        super().setText(text)
        self._hold_wrapped_height()

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._hold_wrapped_height()

    def _hold_wrapped_height(self) -> None:
        needed = self.heightForWidth(max(self.width(), 1))
        if needed > 0 and needed != self.minimumHeight():   # a new minimum lays the window out: only on change
            self.setMinimumHeight(needed)
