"""Ctrl+E offers the figure of the panel the user last worked in: a click in the attention heatmap makes it
Attention, even though the click's selection redraws the Tokens panel (and every other) too."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QDialog

from tests.gui.qt_helpers import type_text


def offered_figure(window, monkeypatch) -> str:
    """The label the Export figure dialog opens on when Ctrl+E is pressed (the dialog is not shown)."""
    import gui.export_dialog

    offered = []

    class Recorder:
        def __init__(self, figures, current, folder, parent=None):
            offered.append(figures[current][0])

        def exec(self):
            return QDialog.DialogCode.Rejected

    monkeypatch.setattr(gui.export_dialog, "ExportFigureDialog", Recorder)
    action = next(a for a in window.findChildren(type(window.menuBar().actions()[0]))
                  if a.shortcut() == QKeySequence("Ctrl+E"))
    action.trigger()
    assert offered, "Ctrl+E opened no dialog"
    return offered[0]


def click_heatmap_cell(qtbot, panel, query: int, key: int) -> None:
    point = panel.matrix_view.mapFromScene(panel.matrix.cell_centre(query, key))
    qtbot.mouseClick(panel.matrix_view.viewport(), Qt.MouseButton.LeftButton, pos=point)


def test_ctrl_e_offers_the_attention_heatmap_after_a_click_in_it(qtbot, make_window, monkeypatch):
    window = make_window()
    type_text(qtbot, window, "The cat sat on the mat.")
    window.sentence_bar.setFocus()
    attention = window.panel("attention")
    click_heatmap_cell(qtbot, attention, 4, 2)
    qtbot.waitUntil(lambda: window.controller.selection.query == 4)
    window.flush_redraws()
    qtbot.wait(50)   # the redraws the selection posted, and any focus change they make
    assert offered_figure(window, monkeypatch) == f"{attention.title} — attention_head"   # not the grid, its first


def test_ctrl_e_follows_the_tab_the_user_brings_up(qtbot, make_window, monkeypatch):
    window = make_window()
    type_text(qtbot, window, "The cat sat on the mat.")
    click_heatmap_cell(qtbot, window.panel("attention"), 3, 1)
    window.docks["positions"].raise_()
    qtbot.waitUntil(lambda: window.on_screen(window.panel("positions")))
    assert offered_figure(window, monkeypatch).startswith(window.panel("positions").title + " — ")


def copied_figure(window, monkeypatch) -> str | None:
    """The name of the figure Copy figure (Ctrl+Shift+C) puts on the clipboard (recorded, not copied)."""
    import gui.export

    copied = []
    monkeypatch.setattr(gui.export, "copy_figure_to_clipboard", lambda figure: copied.append(figure.name))
    next(a for a in window.findChildren(type(window.menuBar().actions()[0]))
         if a.shortcut() == QKeySequence("Ctrl+Shift+C")).trigger()
    return copied[0] if copied else None


def test_copy_figure_copies_the_heatmap_the_user_clicked(qtbot, make_window, monkeypatch):
    window = make_window()
    type_text(qtbot, window, "The cat sat on the mat.")
    attention = window.panel("attention")
    click_heatmap_cell(qtbot, attention, 4, 2)
    qtbot.waitUntil(lambda: window.controller.selection.query == 4)
    window.flush_redraws()
    assert copied_figure(window, monkeypatch) == "attention_head"


def test_with_no_sentence_there_is_nothing_to_copy_or_export(qtbot, make_window, monkeypatch):
    window = make_window()
    assert window.controller.trace is None
    assert copied_figure(window, monkeypatch) is None
    assert window.last_error.startswith("there is no figure yet")
    window.last_error = None
    import gui.export_dialog

    monkeypatch.setattr(gui.export_dialog, "ExportFigureDialog", None)   # opening it would raise
    next(a for a in window.findChildren(type(window.menuBar().actions()[0]))
         if a.shortcut() == QKeySequence("Ctrl+E")).trigger()
    assert window.last_error.startswith("there is no figure yet")


def test_copy_figure_copies_the_head_lines_view_the_user_clicked(qtbot, make_window, monkeypatch):
    window = make_window()
    type_text(qtbot, window, "The cat sat on the mat.")
    attention = window.panel("attention")
    window.docks["attention"].raise_()
    click_heatmap_cell(qtbot, attention, 4, 2)   # the heatmap first: the lines view must take over from it
    window.flush_redraws()
    lines = attention.lines_view
    qtbot.waitUntil(lambda: lines.isVisible() and lines.width() > 0)
    qtbot.mouseClick(lines, Qt.MouseButton.LeftButton, pos=lines.rect().center())
    window.flush_redraws()
    assert copied_figure(window, monkeypatch) == "attention_lines"


def claims(field, combination) -> bool:
    """Whether the text field takes this key for itself before any shortcut sees it (Qt's ShortcutOverride)."""
    from PySide6.QtCore import QEvent
    from PySide6.QtGui import QKeyEvent
    from PySide6.QtWidgets import QApplication

    event = QKeyEvent(QEvent.Type.ShortcutOverride, combination.key(), combination.keyboardModifiers())
    event.ignore()
    QApplication.sendEvent(field, event)
    return event.isAccepted()


def stand_in_for_export(window) -> list[bool]:
    """A File menu action on Ctrl+A, in place of Export figure on Ctrl+E; the list records each time it runs."""
    ran: list[bool] = []
    stand_in = window.menuBar().actions()[0].menu().addAction("Stand-in for Export figure")
    stand_in.setShortcut(QKeySequence("Ctrl+A"))
    stand_in.triggered.connect(lambda: ran.append(True))
    return ran


def test_a_menu_key_typed_in_the_sentence_bar_runs_the_menu_action(qtbot, make_window):
    """On Linux a line edit takes Ctrl+E (File → Export figure) as "end of line" before any shortcut sees it.
    Offscreen fields have no such binding, so Ctrl+A, which fields take as select-all on every platform,
    stands in for it: a key the menus show runs the menu's action, wherever the cursor is."""
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QLineEdit

    ctrl_a = QKeySequence("Ctrl+A")[0]
    assert claims(QLineEdit("a field of its own"), ctrl_a)   # else this test would prove nothing
    window = make_window()
    ran = stand_in_for_export(window)
    bar = window.sentence_bar
    bar.setText("The cat sat.")
    bar.setFocus()
    qtbot.waitUntil(bar.hasFocus)
    bar.setCursorPosition(0)
    QTest.keyClick(bar, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    assert ran == [True]
    assert not bar.hasSelectedText() and bar.cursorPosition() == 0
    assert not claims(bar, QKeySequence("Ctrl+E")[0])   # Export figure's own key, on any platform
    undo = QKeySequence("Ctrl+Z")[0]
    assert claims(bar, undo) == claims(QLineEdit(), undo)   # a key the menus do not show stays the field's


def test_a_field_of_a_dialog_keeps_a_key_the_window_s_menus_use(qtbot, make_window):
    """In another window (a dialog) the menus' shortcuts are not active, so the field still gets the key."""
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QLineEdit, QVBoxLayout

    window = make_window()
    ran = stand_in_for_export(window)
    dialog = QDialog(window)
    field = QLineEdit("a path")
    QVBoxLayout(dialog).addWidget(field)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.activateWindow()
    field.setFocus()
    qtbot.waitUntil(field.hasFocus)
    QTest.keyClick(field, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    assert ran == [] and field.selectedText() == "a path"
    dialog.close()


def test_a_folder_an_export_failed_to_write_is_not_offered_again(qtbot, make_window, tmp_path):
    window = make_window()
    type_text(qtbot, window, "The cat sat.")
    window.settings.setValue("export/folder", str(tmp_path / "before"))
    blocked = tmp_path / "a_file"
    blocked.write_text("in the way")
    figure = window.panel("attention").figures()[0]
    window.export_figure_to(figure, "csv", blocked / "grid.csv")
    qtbot.waitUntil(lambda: window.last_error.startswith("export failed"))
    assert window._last_folder() == str(tmp_path / "before")
    good = tmp_path / "figures"
    window.export_figure_to(figure, "csv", good / "grid.csv")
    qtbot.waitUntil(lambda: window._last_folder() == str(good))
    assert (good / "grid.csv").exists()
