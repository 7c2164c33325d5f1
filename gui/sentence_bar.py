"""The sentence bar: a one-line editor whose text the model reads exactly as it stands.

A QLineEdit, because its text() is the string it was given or the user typed: a QPlainTextEdit's
toPlainText() turns NBSP into a space and U+2028, U+2029 and "\\r" into "\\n", so the model would
read another string than `main.py trace --text` does. Line breaks (pasted, or in --text) are kept
and show as spaces; the Tokens panel shows them as ↵.

Two things no Qt widget can hold are handled where the text comes in (`setText`), and said on
screen (`sigNote`): a surrogate code point (U+D800–U+DFFF) cannot be stored in a QString, so the
tokenizer's own rule is applied first — each becomes U+FFFD, as `main.py trace` makes it — and a
leading U+FEFF, which PySide reads as a byte-order mark and drops, is passed doubled (and text
travels in signals as `object`, for the same reason).

Typing emits sigTextEdited at every change (the controller debounces); Enter emits sigSubmitted
(analyse now). `highlight(start, end)` tints characters without moving the cursor or the user's
selection (the Tokens panel uses it on hover). Positions are Python string indices (code points);
Qt counts UTF-16 units, so they are converted.
"""
from __future__ import annotations

import unicodedata

from PySide6.QtCore import QCoreApplication, Signal
from PySide6.QtGui import QColor, QInputMethodEvent, QTextCharFormat
from PySide6.QtWidgets import QLineEdit, QWidget

from core.tokenizer import clean_text
from gui.fonts import ui_font

HIGHLIGHT = QColor(255, 210, 120)
MAX_CHARS = 2**31 - 1   # QLineEdit cuts text at 32767 characters unless told otherwise
BOM = "\ufeff"
SURROGATE_RULE = ("U+FFFD (�) stands for a surrogate code point (U+D800–U+DFFF) in the text given: "
                  "UTF-8 cannot encode one, so the model reads U+FFFD, as main.py trace does")
# Characters that reorder the text drawn after them (embeddings, overrides, isolates, marks): the bar
# draws the text in their order, the model reads it in the order it was typed.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def bidi_note(text: str) -> str:
    """What the bar's drawing of `text` does not show, when it holds a bidirectional control; else ""."""
    found = sorted({ch for ch in text if ch in BIDI_CONTROLS})
    if not found:
        return ""
    names = ", ".join(f"U+{ord(ch):04X} ({unicodedata.name(ch, '?').lower()})" for ch in found)
    return (f"The text holds {names}: the bar draws it reordered, as that control asks; the model reads "
            "the characters in the order they were typed, as the Tokens panel shows them")


def utf16_offset(text: str, index: int) -> int:
    """Python index -> position in Qt's UTF-16 text (characters past U+FFFF take two units)."""
    return len(text[:index].encode("utf-16-le")) // 2


def surrogate_count(text: str) -> int:
    return sum(1 for ch in text if "\ud800" <= ch <= "\udfff")


def _for_qt(text: str) -> str:
    """The str to hand PySide so that the QString holds exactly `text` (no surrogates left in it)."""
    return BOM + text if text.startswith(BOM) else text


class SentenceBar(QLineEdit):
    sigTextEdited = Signal(object)   # str; `object` so that Qt does not copy it into a QString (see above)
    sigSubmitted = Signal()
    sigNote = Signal(str)   # the surrogate rule while it applies to the text shown; "" clears

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sentence_bar")
        self.setFont(ui_font(13))
        self.setMaxLength(MAX_CHARS)
        self.setPlaceholderText("Type a sentence, English or 中文… (Enter analyses now)")
        self.setToolTip("The model reads exactly this text. " + SURROGATE_RULE + ".")
        self._silent = False
        self._surrogates_replaced = False
        self._highlight: tuple[int, int] | None = None
        self.textChanged.connect(self._on_text_changed)
        self.returnPressed.connect(self.sigSubmitted)

    def setText(self, text: str) -> None:  # noqa: N802 (used by the app, the controller and tests)
        """Replace the text as if typed: the model re-runs."""
        self._surrogates_replaced = surrogate_count(text) > 0
        super().setText(_for_qt(clean_text(text)))
        self.sigNote.emit(self.note())

    def set_text_silently(self, text: str) -> None:
        """Show a sentence the controller already knows (after Append/Generate): no re-run."""
        if text == self.text():
            return
        self._silent = True
        try:
            self.setText(text)
        finally:
            self._silent = False

    def set_text_undoably(self, text: str) -> None:
        """As set_text_silently, as one edit of the bar's undo history: setText forgets that history, and
        with it the sentence the user typed. Ctrl+Z then gives that sentence back, as typing it would."""
        if text == self.text():
            return
        self._surrogates_replaced = surrogate_count(text) > 0
        self._silent = True
        try:
            self.selectAll()
            self.insert(_for_qt(clean_text(text)))
        finally:
            self._silent = False

    def note(self) -> str:
        """The surrogate rule, while the text shows a U+FFFD that stands for a surrogate, and what a
        bidirectional control changes in the bar's drawing; "" when neither applies."""
        text = self.text()
        notes = [SURROGATE_RULE if self._surrogates_replaced and "\ufffd" in text else "", bidi_note(text)]
        return " · ".join(note for note in notes if note)

    def _on_text_changed(self, _text: str) -> None:
        self.clear_highlight()
        self.sigNote.emit(self.note())
        if not self._silent:   # text(), not the signal's copy: that one loses a leading U+FEFF too
            self.sigTextEdited.emit(self.text())

    # ------------------------------------------------------------ highlighting
    def highlight(self, start: int, end: int) -> None:
        """Tint characters [start, end) of the text (Python indices); start < 0 clears."""
        text = self.text()
        if start < 0 or end <= start or start >= len(text):
            self.clear_highlight()
            return
        end = min(end, len(text))
        first, last = utf16_offset(text, start), utf16_offset(text, end)
        fmt = QTextCharFormat()
        fmt.setBackground(HIGHLIGHT)
        self._set_formats([QInputMethodEvent.Attribute(QInputMethodEvent.AttributeType.TextFormat,
                                                       first - self.cursorPosition(), last - first, fmt)])
        self._highlight = (start, end)

    def clear_highlight(self) -> None:
        if self._highlight is not None:
            self._highlight = None
            self._set_formats([])

    def _set_formats(self, attributes: list) -> None:
        # QLineEdit draws text formats only for input-method text; an input-method event with nothing to
        # commit sets them (positions relative to the cursor) and leaves the text, cursor and selection alone.
        QCoreApplication.sendEvent(self, QInputMethodEvent("", attributes))

    def highlighted_span(self) -> tuple[int, int] | None:
        """The highlighted characters as Python indices (for tests and the status bar), or None."""
        return self._highlight
