"""Text laid out once per font and string, then drawn many times: token labels recur on every repaint
and from sentence to sentence.

QPainter.drawText lays a string out (shaping, font fallback for CJK) on every call, tens of
microseconds each; a QStaticText keeps its layout, and drawing it copies cached glyphs. The pixels
are the same as drawText's. A QStaticText is drawn with the painter's font set to the font it was
laid out with (else it is laid out again), so each font has its own cache, shared by every widget
that draws in that font.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QStaticText

CACHE_LIMIT = 20000   # strings kept per font; a long session starts afresh beyond this
_BY_FONT: dict[str, "StaticTexts"] = {}


class StaticTexts:
    """`texts(s)`: s laid out in this font as a QStaticText; `texts.width(s)`: its horizontal advance."""

    def __init__(self, font: QFont) -> None:
        self.font = QFont(font)
        self._texts: dict[str, QStaticText] = {}

    def __call__(self, text: str) -> QStaticText:
        laid_out = self._texts.get(text)
        if laid_out is None:
            if len(self._texts) >= CACHE_LIMIT:
                self._texts.clear()
            laid_out = QStaticText(text)
            laid_out.setTextFormat(Qt.TextFormat.PlainText)   # a token "<b>" is text, not markup
            laid_out.prepare(font=self.font)
            self._texts[text] = laid_out
        return laid_out

    def width(self, text: str) -> float:
        return self(text).size().width()


def static_texts(font: QFont) -> StaticTexts:
    """The one cache for this font (fonts that compare equal share it)."""
    key = f"{font.key()}|{','.join(font.families())}"   # key() leaves the fallback families out
    texts = _BY_FONT.get(key)
    if texts is None:
        texts = _BY_FONT[key] = StaticTexts(font)
    return texts
