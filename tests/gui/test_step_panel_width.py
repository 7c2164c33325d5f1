"""Step by step (issue 10): tables use the card's width, say what they leave out, and Go to reaches every card."""
from __future__ import annotations

from PySide6.QtCore import Qt

from gui.panels.step_panel import DOT_TITLE, StepPanel

TEXT = "The cat sat on the mat because it was tired."


def number_columns(card) -> int:
    model = card.model
    return sum(not model.is_gap_column(c) for c in range(model.columnCount()))


def test_a_wider_panel_shows_more_dims_and_still_fits_its_tables(show, qtbot, analysed):
    panel = show(StepPanel(), 700, 900)
    panel.set_trace(analysed(TEXT))
    narrow = number_columns(panel._cards["x"])
    panel.resize(1400, 900)
    qtbot.waitUntil(lambda: number_columns(panel._cards["x"]) > narrow, timeout=5000)
    wide = number_columns(panel._cards["x"])
    assert wide >= narrow + 10
    for key in ("x", "q", "concat"):
        table = panel._cards[key].table
        qtbot.waitUntil(lambda table=table: table.horizontalHeader().length() <= table.viewport().width(), timeout=5000)
        assert not table.horizontalScrollBar().isVisible(), key


def test_dims_left_out_end_in_a_gap_column_that_counts_them(show, analysed):
    panel = show(StepPanel(), 700, 900)
    trace = analysed(TEXT)
    panel.set_trace(trace)
    card = panel._cards["x"]
    model, last = card.model, card.model.columnCount() - 1
    assert model.is_gap_column(last) and model.headerData(last, Qt.Orientation.Horizontal) == "…"
    shown = number_columns(card)
    left = trace.config.hidden_size - shown
    assert model.headerData(last, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole).startswith(
        f"{left} columns left out")
    assert f"of {trace.config.hidden_size}" in card.elided.text()


def test_go_to_lists_the_dot_product_card_after_the_scaled_scores_and_jumps_to_it(show, qtbot, analysed):
    panel = show(StepPanel(), 700, 600)
    panel.set_trace(analysed(TEXT))
    items = [panel.step_index.itemText(i) for i in range(panel.step_index.count())]
    dot = next(i for i, text in enumerate(items) if DOT_TITLE in text)
    assert items[dot - 1].endswith("÷ √Dh") and len(items) == len(panel.calculation.steps) + 1
    panel.step_index.setCurrentIndex(dot)
    panel.step_index.activated.emit(dot)
    bar = panel._scroll.verticalScrollBar()
    assert bar.value() > 0 and abs(bar.value() - (panel.dot_card.y() - 8)) <= 1 or bar.value() == bar.maximum()
    following = panel._cards["masked"]
    panel.step_index.activated.emit(dot + 1)
    assert bar.value() in (following.y() - 8, bar.maximum())
