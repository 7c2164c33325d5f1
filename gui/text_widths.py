"""Text widths measured once per font and string: labels recur from sentence to sentence, and measuring
a string with a CJK fallback font costs tens of microseconds every time."""
from __future__ import annotations

from PySide6.QtGui import QFont, QFontMetricsF

CACHE_LIMIT = 20000   # strings kept per font; a long session starts afresh beyond this


class TextWidths:
    def __init__(self, font: QFont) -> None:
        self.font = QFont(font)
        self.metrics = QFontMetricsF(font)
        self._widths: dict[str, float] = {}

    def __call__(self, text: str) -> float:
        """The horizontal advance of `text` in this font, in pixels."""
        width = self._widths.get(text)
        if width is None:
            if len(self._widths) >= CACHE_LIMIT:
                self._widths.clear()
            width = self._widths[text] = self.metrics.horizontalAdvance(text)
        return width
