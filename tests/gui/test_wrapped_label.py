"""A wrapped label squeezed in a splitter keeps the height of its lines: it never lies over the widget above."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout, QWidget

from gui.panels.attention_panel import AttentionPanel
from gui.wrapped_label import WrappedLabel

NOTE = "Badges: role score ≥ 0.5 · switch off: corner box, right-click, or a layer's name"


def _squeezed(note: QLabel, show) -> tuple[QSplitter, QWidget, QLabel]:
    above = QLabel("above")
    above.setMinimumHeight(120)
    box = QWidget()
    layout = QVBoxLayout(box)
    layout.addWidget(above, 1)
    layout.addWidget(note)
    splitter = QSplitter(Qt.Orientation.Vertical)
    splitter.addWidget(box)
    splitter.addWidget(QLabel("below"))
    show(splitter, 220, 400)
    splitter.setSizes([150, 250])   # less than the box's content, as a first layout gave the grid's box
    return splitter, above, note   # the splitter owns both: kept alive by the caller


def test_a_wrapped_label_keeps_its_lines_below_the_widget_above(show, qtbot):
    _, above, note = _squeezed(WrappedLabel(NOTE), show)
    qtbot.wait(30)
    assert note.height() >= note.heightForWidth(note.width()) > note.fontMetrics().height()   # wraps: 2+ lines
    assert note.geometry().top() >= above.geometry().bottom()


def test_the_grid_help_never_covers_the_thumbnails(show, analysed, qtbot):
    panel = show(AttentionPanel(), 800, 330)
    panel.set_trace(analysed("The cat sat on the mat because it was warm."))
    panel._right.setSizes([150, 1000])
    qtbot.wait(50)
    area, help_label = panel.grid_area, panel.grid_help
    assert help_label.geometry().top() >= area.geometry().bottom()
    last_row = panel.grid.head_rect(1, 3)
    assert panel.grid.mapTo(area.parentWidget(), last_row.bottomLeft()).y() <= help_label.geometry().top()
