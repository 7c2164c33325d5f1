"""The sentence bar hands the model exactly the string it was given or the user typed, as the CLI reads it."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtTest import QTest

import main
from core.tokenizer import clean_text
from gui.controller import Controller
from gui.fonts import register_fonts
from gui.main_window import MainWindow
from gui.sentence_bar import SURROGATE_RULE, SentenceBar

WAIT_MS = 30000
TEXTS = {
    "nbsp": "a\u00a0b and\u00a0then",
    "line_separator": "one\u2028two",
    "paragraph_separator": "one\u2029two",
    "carriage_return": "one\rtwo",
    "crlf": "one\r\ntwo\nthree",
    "lone_surrogate": "bad \ud800 char",
    "surrogate_pair_as_code_points": "pair \ud83d\ude00 here",
    "chinese": "订单成交，订单取消。",
    "emoji": "cats 🐈 and 😀 faces",
    "leading_bom": "\ufeffstarts with a BOM",
    "tab_and_zero_width": "tab\there\u200bzw",
}


@pytest.fixture()
def window(qtbot, bundle, tmp_path):
    register_fonts()
    settings = QSettings(str(tmp_path / "glassbox.ini"), QSettings.Format.IniFormat)
    window = MainWindow(Controller(bundle, "numpy"), settings)
    qtbot.addWidget(window)
    window.resize(1200, 800)
    window.show()
    qtbot.waitExposed(window)
    yield window
    window.close()


def cli_ids(bundle, text: str, out) -> list[int]:
    assert main.main(["trace", "--text", text, "--out", str(out), "--model", str(bundle.path),
                      "--backend", "numpy"]) == 0
    with np.load(out / "trace.npz") as npz:
        return npz["input_ids"].tolist()


@pytest.mark.parametrize("name", TEXTS)
def test_the_gui_and_the_cli_analyse_the_same_string(qtbot, window, bundle, tmp_path, name):
    text = TEXTS[name]
    window.sentence_bar.setText(text)
    c = window.controller
    qtbot.waitUntil(lambda: c.trace is not None and not c.busy(), timeout=WAIT_MS)
    assert c.trace.text == clean_text(text)
    assert c.trace.input_ids.tolist() == cli_ids(bundle, text, tmp_path / "cli")
    assert c.trace.input_ids.tolist() == bundle.tokenizer.encode(text)


@pytest.mark.parametrize("name", [n for n in TEXTS if "surrogate" not in n])
def test_the_bar_gives_back_exactly_the_text_it_was_given(qtbot, name):
    bar = SentenceBar()
    qtbot.addWidget(bar)
    edited = []
    bar.sigTextEdited.connect(edited.append)
    bar.setText(TEXTS[name])
    assert bar.text() == TEXTS[name]
    assert edited == [TEXTS[name]]


def test_pasted_text_arrives_unchanged(qtbot):
    bar = SentenceBar()
    qtbot.addWidget(bar)
    bar.setText("start: ")
    pasted = "line one\r\nline two\u2029three\u00a0four\u2028five"
    QGuiApplication.clipboard().setText(pasted)
    bar.paste()
    assert bar.text() == "start: " + pasted


def test_typed_characters_arrive_unchanged(qtbot):
    bar = SentenceBar()
    qtbot.addWidget(bar)
    bar.show()
    qtbot.waitExposed(bar)
    bar.setFocus()
    QTest.keyClicks(bar, "a\u00a0b")
    assert bar.text() == "a\u00a0b"


def test_a_long_text_is_not_cut_by_the_widget(qtbot):
    bar = SentenceBar()
    qtbot.addWidget(bar)
    text = "订单成交 and the cat sat. " * 4000
    bar.setText(text)
    assert bar.text() == text


def test_the_surrogate_rule_is_stated_where_it_applies(qtbot, window):
    window.sentence_bar.setText("bad \ud800 char")
    assert window.sentence_bar.text() == "bad \ufffd char"
    qtbot.waitUntil(window.text_note.isVisible)
    assert window.text_note.text() == SURROGATE_RULE
    window.sentence_bar.setText("a clean sentence")
    assert not window.text_note.isVisible()
    assert "U+FFFD" in window.sentence_bar.toolTip()


def test_a_bidirectional_override_is_said_where_the_bar_draws_the_text_reordered(qtbot, window):
    """U+202E turns the bar's drawing of the rest of the text around; the model reads it as typed."""
    window.sentence_bar.setText("\u202eabc done")
    qtbot.waitUntil(window.text_note.isVisible)
    assert "U+202E (right-to-left override)" in window.text_note.text()
    assert window.sentence_bar.text() == "\u202eabc done"   # kept as typed: only said, never changed
    window.sentence_bar.setText("bad \ud800 char \u2067x\u2069")
    assert SURROGATE_RULE in window.text_note.text() and "U+2067" in window.text_note.text()
    window.sentence_bar.setText("a clean sentence")
    assert not window.text_note.isVisible()


def test_enter_submits(qtbot):
    bar = SentenceBar()
    qtbot.addWidget(bar)
    bar.show()
    bar.setText("hello")
    with qtbot.waitSignal(bar.sigSubmitted, timeout=WAIT_MS):
        QTest.keyClick(bar, Qt.Key.Key_Return)
    assert bar.text() == "hello"


def test_highlighting_tints_without_moving_the_cursor_selection_or_text(qtbot):
    bar = SentenceBar()
    qtbot.addWidget(bar)
    bar.show()
    qtbot.waitExposed(bar)
    text = "cats 😀 and 订单"
    bar.setText(text)
    bar.setSelection(0, 4)
    before = bar.grab().toImage()
    bar.highlight(5, 11)   # the emoji (two UTF-16 units) and " and"
    assert bar.highlighted_span() == (5, 11)
    assert (bar.text(), bar.selectedText(), bar.cursorPosition()) == (text, "cats", 4)
    assert bar.grab().toImage() != before, "the tint is not drawn"
    bar.highlight(-1, -1)
    assert bar.highlighted_span() is None
    assert bar.grab().toImage() == before
