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
    """`texts(s)`: s laid out in this font as a QStaticText; `texts.width(s)`, `texts.size(s)`: its
    horizontal advance, its (width, height) (kept as numbers: every relayout of an axis asks for each label's)."""

    def __init__(self, font: QFont) -> None:
        self.font = QFont(font)
        self._texts: dict[str, QStaticText] = {}
        self._sizes: dict[str, tuple[float, float]] = {}

    def __call__(self, text: str) -> QStaticText:
        laid_out = self._texts.get(text)
        if laid_out is None:
            if len(self._texts) >= CACHE_LIMIT:
                self._texts.clear()
                self._sizes.clear()
            laid_out = QStaticText(text)
            laid_out.setTextFormat(Qt.TextFormat.PlainText)   # a token "<b>" is text, not markup
            laid_out.prepare(font=self.font)
            self._texts[text] = laid_out
        return laid_out

    def size(self, text: str) -> tuple[float, float]:
        size = self._sizes.get(text)
        if size is None:
            laid_out = self(text).size()
            size = self._sizes[text] = (laid_out.width(), laid_out.height())
        return size

    def width(self, text: str) -> float:
        return self.size(text)[0]


def static_texts(font: QFont) -> StaticTexts:
    """The one cache for this font (fonts that compare equal share it)."""
    key = f"{font.key()}|{','.join(font.families())}"   # key() leaves the fallback families out
    texts = _BY_FONT.get(key)
    if texts is None:
        texts = _BY_FONT[key] = StaticTexts(font)
    return texts
