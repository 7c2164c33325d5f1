"""The menus' shortcuts work wherever the cursor is, the sentence bar included.

A text field sees a key before any shortcut does (Qt's ShortcutOverride event) and keeps the keys it
edits with: on Linux every QLineEdit takes Ctrl+E as "end of line", so File → Export figure (Ctrl+E)
did nothing while the cursor was in the sentence bar, where a user mostly is. The menus show their
keys, so those win; a field keeps every other key (Ctrl+A, Ctrl+Z, Home, End...).
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import (QAbstractSpinBox, QLineEdit, QMainWindow, QMenu, QPlainTextEdit, QTextEdit,
                               QWidget)

TEXT_FIELDS = (QLineEdit, QAbstractSpinBox, QTextEdit, QPlainTextEdit)


def menu_key_combinations(menus: list[QMenu]) -> set[int]:
    """The one-key shortcuts (as QKeyCombination.toCombined()) of the enabled actions in these menus and
    their sub-menus."""
    found: set[int] = set()
    for menu in menus:
        for action in menu.actions():
            if action.menu() is not None:
                found |= menu_key_combinations([action.menu()])
            elif action.isEnabled():
                found |= {sequence[0].toCombined() for sequence in action.shortcuts() if sequence.count() == 1}
    return found


class MenuShortcutsFirst(QObject):
    """Watches each text field of `window` as it takes the focus (installed on the fields alone: an
    application-wide filter would run Python for every event the app delivers, paints included)."""

    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self._window = window

    def follow_focus(self, _old: QWidget | None, new: QWidget | None) -> None:
        # Any field, a floating dock's or a dialog's too: where no shortcut of the window is active (a
        # dialog), Qt hands the key on to the field as it would have.
        if isinstance(new, TEXT_FIELDS):
            new.installEventFilter(self)   # a filter installed twice still runs once

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.ShortcutOverride and event.keyCombination().toCombined() in self._menu_keys():
            return True   # the field never sees it, so never claims it: the menu's action runs
        return False

    def _menu_keys(self) -> set[int]:
        menus = [action.menu() for action in self._window.menuBar().actions() if action.menu() is not None]
        return menu_key_combinations(menus)
