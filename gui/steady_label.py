"""A label whose new text re-lays out the window only when the text needs a different size.

QLabel.setText always asks its layout to run again, and every layout that runs asks its parent's:
one changed word in a panel's summary or in the status bar lays out the whole main window and all
its docks (~8–10 ms a label). SteadyLabel holds a QLabel (`.label`, filling it) and passes that
request on only when the label's size needs change: for wrapped text, its height at the width it
has or its minimum size; otherwise its size hint or minimum size. A wrapped label's size hint is
not compared: its width follows the length of the text, and it only sizes a dock not yet laid out.

Widths have slack: a text up to WIDTH_SLACK pixels narrower than the one laid out keeps the room
that one had (a count going from 183 to 169 bytes), so the words beside it stay put while the user
types; a wider text, and any change of height, is laid out at once. A wrapped label's minimum (its
longest word) is passed on only once it no longer fits in the label as it is: a merge caption's
longest word changes with every sentence, and the layout would place everything where it was.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QSize
from PySide6.QtWidgets import QLabel, QWidget

WIDTH_SLACK = 16   # pixels a text may shrink by and keep the width it was laid out with


def _holds(laid_out: QSize, needed: QSize) -> bool:
    """The size the layout gave room for still suits a text needing `needed`: the same height, and a
    width at most WIDTH_SLACK wider than it needs."""
    return laid_out.height() == needed.height() and 0 <= laid_out.width() - needed.width() <= WIDTH_SLACK


def _needs_held(laid_out: tuple | None, needed: tuple, wrapped_in: QSize | None) -> bool:
    """What the layout last read (`laid_out`: policy, size hint or height for width, minimum size)
    still holds for `needed`, but for width slack. wrapped_in: a wrapped label's size now, whose new
    minimum (its longest word) changes nothing on screen while it fits in it."""
    if laid_out is None:
        return False
    (policy, hint, least), (new_policy, new_hint, new_least) = laid_out, needed
    if policy != new_policy or not (hint == new_hint or isinstance(hint, QSize) and isinstance(new_hint, QSize)
                                                        and _holds(hint, new_hint)):
        return False
    if wrapped_in is not None:
        return new_least.width() <= wrapped_in.width() and new_least.height() <= wrapped_in.height()
    return least == new_least or _holds(least, new_least)


class SteadyLabel(QWidget):
    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel(text, self)
        self._needs = None
        self._pass_on_if_resized()

    # ------------------------------------------------------------ the label's text
    def text(self) -> str:
        return self.label.text()

    def setText(self, text: str) -> None:  # noqa: N802 (QLabel's name)
        if text == self.label.text():
            return   # measuring a wrapped rich text again costs ~0.3 ms for nothing
        self.label.setText(text)
        self._pass_on_if_resized()   # now: what is laid out next (an export) sees the new size at once

    def setWordWrap(self, on: bool) -> None:  # noqa: N802
        self.label.setWordWrap(on)
        self._pass_on_if_resized()

    # ------------------------------------------------------------ geometry: the label's own
    def sizeHint(self) -> QSize:  # noqa: N802
        return self.label.sizeHint()

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return self.label.minimumSizeHint()

    def heightForWidth(self, width: int) -> int:  # noqa: N802
        return self.label.heightForWidth(width)

    def resizeEvent(self, event) -> None:  # noqa: N802
        self.label.setGeometry(self.rect())
        self._needs = self._size_needs()   # what the layout that placed it saw
        super().resizeEvent(event)

    def showEvent(self, event) -> None:  # noqa: N802
        self._pass_on_if_resized()
        super().showEvent(event)

    def event(self, event: QEvent) -> bool:
        """The label's layout request (a new text, font or style) stops here unless its size needs changed."""
        if event.type() == QEvent.Type.LayoutRequest:
            self._pass_on_if_resized()
            return True
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._needs = None   # QWidget lays out again for these itself; measure afresh next time
        return super().event(event)

    def _size_needs(self) -> tuple:
        """What a layout reads (bounded by a size set on the holder, e.g. a fixed width)."""
        label, smallest, largest = self.label, self.minimumSize(), self.maximumSize()
        least = label.minimumSizeHint().expandedTo(smallest).boundedTo(largest)
        if label.wordWrap():
            return label.sizePolicy(), label.heightForWidth(self.width()), least
        return label.sizePolicy(), label.sizeHint().expandedTo(smallest).boundedTo(largest), least

    def _pass_on_if_resized(self) -> None:
        needs = self._size_needs()
        if not _needs_held(self._needs, needs, self.size() if self.label.wordWrap() and self.isVisible() else None):
            self._needs = needs
            self.setSizePolicy(self.label.sizePolicy())   # QLabel's: height for width once text wraps
            self.updateGeometry()
