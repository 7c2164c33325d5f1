"""The Step by step panel: shows this run's numbers, follows the selection, exports every step."""
from __future__ import annotations

import csv
import io
import re

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QLabel

from core.runners import NumpyRunner
from core.session import analyse
from gui import export
from gui.panels.step_panel import StepPanel
from gui.step_cards import format_value, two_lines, with_gaps
from gui.text_fit import elide
from core.steps import index_ranges
from gui.selection import Selection

ENGLISH = "The cat sat on the mat because it was tired."
CHINESE = "模型会把每个词切成更小的片段。"


@pytest.fixture(scope="module")
def english(bundle):
    return analyse(NumpyRunner(bundle), ENGLISH)


@pytest.fixture
def panel(show):
    return show(StepPanel(), 760, 900)


def cell_texts(card, display_row: int) -> list[str]:
    model = card.model
    return [model.data(model.index(display_row, c), Qt.DisplayRole) for c in range(model.columnCount())]


def display_row_of(card, source_row: int) -> int:
    model = card.model
    return next(r for r in range(model.rowCount()) if model.source_index(model.index(r, 0))[0] == source_row)


def test_empty_state_says_what_to_do_and_exports_nothing(panel):
    panel.set_trace(None)
    assert "Type" in panel.empty.text() and panel.showing_empty_state()
    assert panel.figures() == []


def test_softmax_card_shows_the_traced_attention_row_rounded(panel, english):
    panel.set_selection(Selection(layer=1, head=2))
    panel.set_trace(english)
    card = panel._cards["softmax"]
    query = english.n_tokens - 1
    shown = cell_texts(card, display_row_of(card, query))
    cols = [card.model.source_index(card.model.index(0, c))[1] for c in range(card.model.columnCount())]
    expected = ["…" if j is None else format_value(float(english.layers[1].attn[2, query, j])) for j in cols]
    assert shown == expected


def test_tooltips_give_full_precision(panel, english):
    panel.set_trace(english)
    card = panel._cards["q"]
    tip = card.model.data(card.model.index(0, 0), Qt.ToolTipRole)
    value = float(tip.splitlines()[-1])
    assert value == pytest.approx(float(english.layers[0].q[0, 0, 0]), abs=1e-5)
    assert len(tip.splitlines()[-1]) > len(card.model.data(card.model.index(0, 0), Qt.DisplayRole))


def test_masked_cells_read_minus_infinity(panel, english):
    panel.set_selection(Selection(query=2))
    panel.set_trace(english)
    card = panel._cards["masked"]
    texts = cell_texts(card, display_row_of(card, 0))
    assert texts[0] != "−∞" and set(texts[1:]) - {"…"} == {"−∞"}   # "…": keys left out


def test_the_selected_query_and_key_drive_the_dot_product(panel, english):
    panel.set_trace(english)
    panel.set_selection(Selection(layer=0, head=1, query=None, key=2))  # key with "last token" as query
    dot = panel.calculation.dot
    assert (dot.query, dot.key) == (english.n_tokens - 1, 2)
    assert f"score[{dot.query}, 2]" in panel.dot_card.formula.text()
    model = panel.dot_card.model
    trace_row = model.rowCount() - 1
    assert model.data(model.index(trace_row, 2), Qt.DisplayRole) == format_value(
        float(english.layers[0].scores[1, dot.query, 2]))


def test_combos_ask_for_a_new_selection(panel, english, qtbot):
    panel.set_trace(english)
    with qtbot.waitSignal(panel.sigSelect) as blocker:
        panel._combos["key"].activated.emit(3)
    assert blocker.args == [{"key": 3}]
    with qtbot.waitSignal(panel.sigSelect) as blocker:
        panel._combos["head"].activated.emit(1)
    assert blocker.args == [{"head": 1}]


def test_clicking_a_score_selects_its_query_and_key(panel, english, qtbot):
    panel.set_trace(english)
    card = panel._cards["softmax"]
    index = card.model.index(card.model.rowCount() - 1, 0)  # the last query shown, the first key
    query, key = card.model.source_index(index)
    assert key < query
    with qtbot.waitSignal(panel.sigSelect) as blocker:
        card.table.clicked.emit(index)
    assert blocker.args == [{"query": query, "key": key}]


def test_selection_changes_redraw_layer_and_head(panel, english):
    panel.set_trace(english)
    panel.set_selection(Selection(layer=1, head=3, query=4))
    assert (panel.calculation.layer, panel.calculation.head, panel.calculation.query) == (1, 3, 4)
    assert panel._combos["layer"].currentIndex() == 1 and panel._combos["head"].currentIndex() == 3
    assert panel._combos["key"].count() == 5  # keys 0..4: a query sees only itself and earlier tokens
    assert "rows 48–63" in panel._cards["q"].note.text()


def test_cards_are_reused_across_refreshes(panel, english, bundle):
    panel.set_trace(english)
    cards = dict(panel._cards)
    panel.set_trace(analyse(NumpyRunner(bundle), "Another sentence entirely."))
    assert panel._cards == cards and all(a is b for a, b in zip(cards.values(), panel._cards.values()))


def test_chinese_tokens_label_the_rows(panel, bundle):
    trace = analyse(NumpyRunner(bundle), CHINESE)
    panel.set_trace(trace)
    card = panel._cards["x"]
    headers = [card.model.headerData(r, Qt.Vertical, Qt.ToolTipRole) for r in range(card.model.rowCount())]
    assert any(label and any("\u4e00" <= ch <= "\u9fff" for ch in label) for label in headers)


def test_a_hidden_panel_defers_drawing_until_shown_or_exported(qtbot, english, bundle):
    panel = StepPanel()
    qtbot.addWidget(panel)
    panel.set_trace(english)
    first = panel._cards.get("softmax")
    assert first is None  # never shown: no card filled yet
    figures = {f.name: f for f in panel.figures()}
    card = panel._cards["softmax"]
    query = english.n_tokens - 1
    assert cell_texts(card, display_row_of(card, query))[0] == format_value(float(english.layers[0].attn[0, query, 0]))
    assert {"step_by_step", "step_dot_product", "step_01_x", "step_10_softmax"} <= set(figures)


def test_figures_export_every_step_and_the_dot_product(panel, english):
    panel.set_selection(Selection(layer=1, head=0, query=6, key=2))
    panel.set_trace(english)
    figures = {f.name: f for f in panel.figures()}
    steps = [name for name in figures if name[:5] == "step_" and name[5:7].isdigit()]
    assert steps[:3] == ["step_01_x", "step_02_q", "step_03_k"] and len(steps) == 15
    assert figures["step_10_softmax"].widget is panel._cards["softmax"]   # one card, one figure
    rows = list(csv.reader(io.StringIO(figures["step_10_softmax"].table())))
    attn = np.array([[float(v) for v in row[1:]] for row in rows[1:]])
    np.testing.assert_allclose(attn, english.layers[1].attn[0], atol=1e-6)
    overview = list(csv.reader(io.StringIO(figures["step_by_step"].table())))
    assert overview[0][0] == "file" and [row[0] for row in overview[1:]] == steps
    dot_rows = list(csv.reader(io.StringIO(figures["step_dot_product"].table())))
    assert float(dot_rows[-1][3]) == float(english.layers[1].scores[0, 6, 2])
    assert figures["step_dot_product"].widget is panel.dot_card


def test_the_overview_shows_every_step_on_one_page(panel, english):
    panel.set_trace(english)
    overview = panel.figures()[0]
    assert overview.name == "step_by_step"
    image = QImage.fromData(export.figure_files(overview, ["png"])["step_by_step.png"], "PNG")
    assert image.width() > 600 and image.width() < 4 * image.height()
    colours = {image.pixel(x, y) for x in range(0, image.width(), 17) for y in range(0, image.height(), 23)}
    assert len(colours) > 20
    titles = [label.text() for label in overview.widget.findChildren(QLabel) if label.isVisibleTo(overview.widget)]
    assert sum(bool(re.match(r"\d+\. ", title)) for title in titles) == 15


def test_number_format_is_about_three_significant_digits():
    assert format_value(0.123456) == "0.123"
    assert format_value(-12.3456) == "-12.3"
    assert format_value(-0.000158) == "-1.58e-4"
    assert format_value(float("-inf")) == "−∞"
    assert format_value(float("nan")) == ""
    assert format_value(0.0) == "0"


def test_gaps_mark_skipped_rows_and_long_column_labels_wrap():
    assert with_gaps([0, 1, 5, 6, 9]) == [0, 1, None, 5, 6, None, 9]
    assert two_lines("12 ␣because") == "12\n␣because"
    assert two_lines("8 ‹e6 95›散") == "8\n‹e6 95›散"   # a character's bytes whole, as in the row labels
    assert two_lines("3 ␣extraordinarily") == "3\n" + elide("␣extraordinarily") != "3\n␣extraordinarily"


def words_of_tokens(bundle, low: int, high: int) -> str:
    """The longest run of the cat sentence's words that is low < n <= high tokens long."""
    words = ("The cat sat on the mat because the cat was tired, and the dog sat on the log all day.").split()
    texts = [" ".join(words[:k]) for k in range(1, len(words) + 1)]
    return [t for t in texts if low < len(bundle.tokenizer.encode(t)) <= high][-1]


@pytest.mark.parametrize("rows", [19, "PAGE_ROWS"])   # 19 tokens: every key fits the page
def test_a_step_figure_shows_every_row_and_says_which_keys_it_leaves_out(panel, bundle, rows):
    from gui.figure_pages import on_page
    from gui.step_cards import PAGE_ROWS

    trace = analyse(NumpyRunner(bundle), words_of_tokens(bundle, 12, PAGE_ROWS if rows == "PAGE_ROWS" else rows))
    n = trace.n_tokens
    assert 12 < n <= PAGE_ROWS
    panel.set_selection(Selection(layer=0, head=0, query=n - 1, key=3))
    panel.set_trace(trace)
    figure = next(f for f in panel.figures() if f.name == "step_10_softmax")
    card = figure.widget
    assert card.model.rowCount() < n   # the dock: a window of rows, "⋮" for the rest
    with on_page(figure):
        model = card.model
        shown_rows = [model.source_index(model.index(r, 0))[0] for r in range(model.rowCount())]
        shown_keys = [model.source_index(model.index(0, c))[1] for c in range(model.columnCount())]
        assert shown_rows == list(range(n))
        assert card.table.height() >= card.table.sizeHint().height()   # the page holds the whole table
        if shown_keys == list(range(n)):
            assert not card.elided.isVisibleTo(card)   # nothing left out, nothing to say
        else:
            left_out = sorted(set(range(n)) - {k for k in shown_keys if k is not None})
            assert card.elided.isVisibleTo(card) and f"({index_ranges(left_out)} left out)" in card.elided.text()
            assert "queries" not in card.elided.text()   # every row is there
    assert card.model.rowCount() < n   # back in the dock: its window again


def test_a_step_figure_past_its_rows_says_which_queries_it_leaves_out(panel, bundle):
    from gui.figure_pages import on_page
    from gui.step_cards import PAGE_ROWS

    trace = analyse(NumpyRunner(bundle), words_of_tokens(bundle, PAGE_ROWS, 10 ** 6))
    n = trace.n_tokens
    assert n > PAGE_ROWS
    panel.set_selection(Selection(layer=0, head=0, query=n - 1, key=3))
    panel.set_trace(trace)
    figure = next(f for f in panel.figures() if f.name == "step_10_softmax")
    with on_page(figure):
        card = figure.widget
        model = card.model
        shown_rows = {model.source_index(model.index(r, 0))[0] for r in range(model.rowCount())} - {None}
        assert len(shown_rows) == PAGE_ROWS and {0, n - 1} <= shown_rows   # the first query and the selected one
        left_out = sorted(set(range(n)) - shown_rows)
        assert card.elided.isVisibleTo(card) and "queries" in card.elided.text()
        assert f"({index_ranges(left_out)} left out)" in card.elided.text()
