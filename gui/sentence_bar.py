"""The sentence bar: a small multi-line editor whose text the model reads.

Typing emits sigTextEdited at every change (the controller debounces); Enter emits sigSubmitted
(analyse now) instead of starting a new line (Shift+Enter does). `highlight(start, end)` tints
characters without moving the cursor or the user's selection (the Tokens panel uses it on hover).
Positions are Python string indices (code points); Qt counts UTF-16 units, so they are converted.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QKeyEvent, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QPlainTextEdit, QTextEdit, QWidget

from gui.fonts import ui_font

HIGHLIGHT = QColor(255, 210, 120)
VISIBLE_LINES = 2


def utf16_offset(text: str, index: int) -> int:
    """Python index -> position in Qt's UTF-16 text (characters past U+FFFF take two units)."""
    return len(text[:index].encode("utf-16-le")) // 2


class SentenceBar(QPlainTextEdit):
    sigTextEdited = Signal(str)
    sigSubmitted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sentence_bar")
        self.setFont(ui_font(13))
        self.setPlaceholderText("Type a sentence, English or 中文… (Enter analyses now; Shift+Enter adds a line)")
        self.setTabChangesFocus(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        line = QFontMetricsF(self.font()).lineSpacing()
        self.setFixedHeight(int(line * VISIBLE_LINES + 2 * self.frameWidth() + 2 * self.document().documentMargin()))
        self._silent = False
        self.textChanged.connect(self._on_text_changed)

    def text(self) -> str:
        return self.toPlainText()

    def setText(self, text: str) -> None:  # noqa: N802 (QLineEdit-like, used by tests and the app)
        """Replace the text as if typed: the model re-runs."""
        self.setPlainText(text)
        self.moveCursor(QTextCursor.MoveOperation.End)

    def set_text_silently(self, text: str) -> None:
        """Show a sentence the controller already knows (after Append/Generate): no re-run."""
        if text == self.toPlainText():
            return
        self._silent = True
        try:
            self.setText(text)
        finally:
            self._silent = False

    def _on_text_changed(self) -> None:
        self.clear_highlight()
        if not self._silent:
            self.sigTextEdited.emit(self.toPlainText())

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.sigSubmitted.emit()
            return
        super().keyPressEvent(event)

    # ------------------------------------------------------------ highlighting
    def highlight(self, start: int, end: int) -> None:
        """Tint characters [start, end) of the text (Python indices); start < 0 clears."""
        text = self.toPlainText()
        if start < 0 or end <= start or start >= len(text):
            self.clear_highlight()
            return
        cursor = QTextCursor(self.document())
        cursor.setPosition(utf16_offset(text, start))
        cursor.setPosition(utf16_offset(text, min(end, len(text))), QTextCursor.MoveMode.KeepAnchor)
        selection = QTextEdit.ExtraSelection()
        selection.cursor = cursor
        fmt = QTextCharFormat()
        fmt.setBackground(HIGHLIGHT)
        selection.format = fmt
        self.setExtraSelections([selection])

    def clear_highlight(self) -> None:
        if self.extraSelections():
            self.setExtraSelections([])

    def highlighted_span(self) -> tuple[int, int] | None:
        """The highlighted characters as Python indices (for tests and the status bar), or None."""
        selections = self.extraSelections()
        if not selections:
            return None
        cursor = selections[0].cursor
        text = self.toPlainText()
        to_index = {utf16_offset(text, i): i for i in range(len(text) + 1)}
        return to_index[cursor.selectionStart()], to_index[cursor.selectionEnd()]
