"""Panels at the default layout of a 1280×800 screen: nothing they write is cut."""
from __future__ import annotations

from PySide6.QtCore import QSize

from tests.gui.qt_helpers import type_text

SMALL_SCREEN = QSize(1152, 752)   # the first window on a 1280×800 screen (gui.main_window.first_window_size)
CHINESE = "我喜欢学习机器学习。"


def shown_at_small_screen(qtbot, make_window, name: str):
    window = make_window()
    window.resize(SMALL_SCREEN)
    window.place_default_layout()
    window.docks[name].raise_()
    type_text(qtbot, window, CHINESE)
    qtbot.waitUntil(lambda: window.on_screen(window.panel(name)))
    window.flush_redraws()
    qtbot.wait(50)
    return window, window.panel(name)


def test_head_roles_column_titles_are_whole(qtbot, make_window):
    _, panel = shown_at_small_screen(qtbot, make_window, "head_roles")
    header = panel.table.horizontalHeader()
    metrics = header.fontMetrics()
    assert header.width() >= header.length(), "the columns scroll out of the table"
    for column in range(panel.table.columnCount()):
        title = panel.table.horizontalHeaderItem(column).text()
        widest = max(metrics.horizontalAdvance(line) for line in title.split("\n"))
        assert header.sectionSize(column) >= widest + 6, f"the column title {title!r} is cut"


def ink_of_cell_labels(panel, cell_px: float) -> int:
    """How many pixels the lens's cell painter inks when its cells are cell_px wide (and 40 px tall)."""
    import numpy as np
    from PySide6.QtGui import QImage, QPainter

    image = QImage(1200, 400, QImage.Format.Format_RGB32)
    image.fill(0x808080)   # grey: the painter writes dark or light text by the cell colour
    painter = QPainter(image)
    painter.scale(cell_px, 40.0)   # data -> device, as the plot's view gives it
    panel.cell_labels.paint(painter, None)
    painter.end()
    pixels = np.frombuffer(image.constBits(), np.uint32, count=image.width() * image.height())
    return int((pixels & 0xFFFFFF != 0x808080).sum())


def test_logit_lens_names_the_token_in_narrow_cells_and_shows_the_whole_heatmap(qtbot, show, analysed):
    from gui.panels.logit_lens_panel import LogitLensPanel

    panel = show(LogitLensPanel(), 520, 480)
    panel.set_trace(analysed("The cat sat on the mat because it was tired."))
    qtbot.waitUntil(lambda: panel.lens is not None and bool(panel.cell_labels.labels), timeout=10_000)   # off the UI thread
    qtbot.wait(50)
    centre = panel.heatmap.cell_centre
    cell_px = panel.view.mapFromScene(centre(0, 1)).x() - panel.view.mapFromScene(centre(0, 0)).x()
    assert 14 <= cell_px < 26, f"cells of {cell_px} px: the case where the numbers' 26 px floor drew nothing"
    assert ink_of_cell_labels(panel, cell_px) > 200   # a token in every cell, cut to it
    bottom = panel.view.mapTo(panel.scroll.viewport(), panel.view.rect().bottomLeft()).y()
    assert bottom <= panel.scroll.viewport().height(), "the heatmap's x labels are below the first screen"


def test_the_head_view_caption_of_hidden_lines_is_whole_in_a_narrow_view(qtbot):
    from PySide6.QtGui import QFontMetricsF

    from gui.fonts import ui_font
    from gui.head_lines import left_out_note

    metrics = QFontMetricsF(ui_font())
    narrow = left_out_note(30896, 0.027, metrics, 220)
    assert narrow == "30,896 lines < 0.027 hidden" and metrics.horizontalAdvance(narrow) <= 220
    wide = left_out_note(30896, 0.027, metrics, 2000)
    assert wide.startswith(narrow) and "hover a token" in wide


def test_the_attention_colour_bar_and_its_numbers_stay_inside_the_heatmaps_view(qtbot, make_window):
    """The heatmap's one-line title was its least width: in this dock the bar's numbers fell off the view."""
    _, panel = shown_at_small_screen(qtbot, make_window, "attention")
    view, bar = panel.matrix_view, panel.colour_bar
    numbers = bar.getAxis("right")
    right_edge = numbers.mapRectToScene(numbers.boundingRect()).right()
    assert view.mapFromScene(right_edge, 0).x() <= view.viewport().width()
    assert view.ci.layout.minimumWidth() <= view.width()


def test_step_cards_fit_the_dock_with_their_matrix_picture_in_view(qtbot, make_window):
    """Every card as wide as the dock gives it: the caption of what is left out wraps instead of widening the
    card, which pushed the whole-matrix picture past the dock's edge behind a horizontal scroll bar."""
    from gui.step_cards import Card

    _, panel = shown_at_small_screen(qtbot, make_window, "step")
    scroll = panel._scroll
    assert not scroll.horizontalScrollBar().isVisible() and scroll.horizontalScrollBar().maximum() == 0
    cards = [card for card in panel.findChildren(Card) if card.isVisible()]
    assert cards and any(card.elided.text() for card in cards)   # a card that leaves rows or dims out
    for card in cards:
        picture = card.heatmap.geometry()
        assert card.width() <= scroll.viewport().width() and picture.right() <= card.contentsRect().right()
