"""The Tokens panel: chips in sentence order, hover and click, and the BPE merge replay."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt

from core.bundle import load_bundle
from core.random_bundle import make_random_bundle
from core.runners import NumpyRunner
from core.session import analyse
from core.tokenizer import BPETokenizer
from core.tokens_view import MergeReplay
from gui.panels.tokens_panel import TokensPanel
from tests.gui.qt_helpers import hover

SEED_LINES = ["订单成交", "订单取消", "查询订单", "订单过期"]   # the first seed's BPE example


@pytest.fixture()
def panel(show):
    return show(TokensPanel(), 900, 600)


@pytest.fixture(scope="module")
def seed_runner(tmp_path_factory):
    """A bundle whose tokenizer learned only from the seed's four lines: it knows 订, 单 and then 订单."""
    tokenizer = BPETokenizer.train(SEED_LINES, vocab_size=300, min_frequency=2)
    folder = tmp_path_factory.mktemp("seed_bundle")
    make_random_bundle(folder, tokenizer=tokenizer)
    return NumpyRunner(load_bundle(folder))


@pytest.mark.parametrize("text", ["The cat sat on the mat.", "订单成交，订单取消。"])
def test_chips_show_piece_id_and_byte_span_in_sentence_order(panel, bundle, text):
    trace = analyse(NumpyRunner(bundle), text)
    panel.set_trace(trace)
    tokens = trace.tokenization.tokens
    assert panel.chips.chip_count() == len(tokens)
    for i, token in enumerate(tokens):
        assert panel.chips.chip_lines(i) == (token.display, f"id {token.id}",
                                             f"bytes {token.byte_start}–{token.byte_end}")
    assert all("\ufffd" not in panel.chips.chip_lines(i)[0] for i in range(len(tokens)))
    n_bytes, n_chars = len(text.encode("utf-8")), len(text)
    assert panel.counts.text() == f"<b>{len(tokens)} tokens</b> · {n_bytes} bytes · {n_chars} characters."


def test_hovering_a_chip_asks_to_highlight_its_characters(panel, bundle, qtbot):
    trace = analyse(NumpyRunner(bundle), "订单成交 and more")
    panel.set_trace(trace)
    token = trace.tokenization.tokens[2]
    centre = panel.chips.chip_rect(2).center().toPoint()
    with qtbot.waitSignal(panel.sigHoverText) as hovered:
        hover(panel.chips, centre)
    assert hovered.args == [token.char_start, token.char_end]


def test_clicking_a_chip_selects_it_as_the_query(panel, bundle, qtbot):
    panel.set_trace(analyse(NumpyRunner(bundle), "one two three four"))
    centre = panel.chips.chip_rect(1).center().toPoint()
    with qtbot.waitSignal(panel.sigSelect) as selected:
        qtbot.mouseClick(panel.chips, Qt.MouseButton.LeftButton, pos=QPoint(centre))
    assert selected.args == [{"query": 1, "key": None}]


def test_merge_replay_starts_from_bytes_and_ends_at_the_tokens(panel, bundle):
    trace = analyse(NumpyRunner(bundle), "订单成交 cats")
    tok = trace.tokenization
    panel.set_trace(trace)
    assert panel.slider.maximum() == len(tok.steps)
    panel.slider.setValue(0)
    assert panel.pieces.chip_count() == len("订单成交 cats".encode("utf-8"))
    panel.slider.setValue(len(tok.steps))
    assert [panel.pieces.chip_lines(i)[0] for i in range(panel.pieces.chip_count())] == \
        [t.display for t in tok.tokens]


def test_each_step_marks_exactly_the_pieces_its_merge_made(bundle):
    tok = analyse(NumpyRunner(bundle), "the cat, the hat, 订单").tokenization
    replay = MergeReplay(tok)
    for k, step in enumerate(tok.steps, start=1):
        fresh = replay.fresh(k)
        assert sum(fresh) == step.count
        assert all(piece == step.merged for piece, new in zip(replay.pieces_at(k), fresh) if new)


def test_the_seed_walkthrough_merges_the_two_characters_into_one_piece(panel, seed_runner):
    """Byte-level BPE reaches 订单 through byte fragments; one step then makes it a single piece, twice."""
    trace = analyse(seed_runner, "订单成交，订单取消")
    tok = trace.tokenization
    panel.set_trace(trace)
    merge = next(k for k, s in enumerate(tok.steps, start=1) if tok.display_pieces([s.merged]) == ("订单",))
    panel.slider.setValue(merge - 1)
    before = [panel.pieces.chip_lines(i)[0] for i in range(panel.pieces.chip_count())]
    assert "订单" not in before and before[0].startswith("‹e8›")   # 订 is e8 ae a2 in UTF-8
    panel.slider.setValue(merge)
    after = [panel.pieces.chip_lines(i)[0] for i in range(panel.pieces.chip_count())]
    assert after.count("订单") == 2 and "订" not in after
    assert "订单" in panel.step_label.text() and "(2×)" in panel.step_label.text()
    rows = MergeReplay(tok).csv().splitlines()
    assert len(rows) == len(tok.steps) + 2 and rows[merge + 1].split(",")[4] == "订单"


def test_empty_state_has_no_chips_and_says_what_to_do(panel, bundle):
    panel.set_trace(analyse(NumpyRunner(bundle), "hello"))
    panel.set_trace(None)
    assert panel.chips.chip_count() == 0
    assert panel.showing_empty_state()
    assert "Type a sentence" in panel.empty.text()


def test_a_new_sentence_shows_its_last_merge_step_unless_the_step_is_pinned(panel, bundle):
    runner = NumpyRunner(bundle)
    panel.set_trace(analyse(runner, "the cat sat on the mat"))
    panel.slider.setValue(2)
    second = analyse(runner, "订单成交，订单取消")
    panel.set_trace(second)
    assert panel.slider.value() == len(second.tokenization.steps)
    panel.slider.setValue(3)
    panel.pin_button.setChecked(True)
    panel.set_trace(analyse(runner, "one two three"))
    assert panel.slider.value() == 3


def test_the_current_merge_step_stays_in_view_when_the_list_shrinks(show, bundle, qtbot):
    """At a first start the window settles its layout after the first sentence is drawn: the list lost
    its bottom rows, and the last step (the one shown) was left below the edge."""
    panel = show(TokensPanel(), 1600, 450)   # docked along the top: the list beside the pieces
    panel.set_trace(analyse(NumpyRunner(bundle), "订单成交，订单取消。The cat sat on the mat because it was tired."))
    steps = panel.step_list
    current = steps.currentIndex()
    assert current.row() == panel.step_model.rowCount() - 1 > 20   # more steps than the list shows
    assert steps.viewport().rect().contains(steps.visualRect(current))
    for height in (400, 330, 260):
        before = steps.viewport().height()
        panel.resize(1600, height)
        qtbot.waitUntil(lambda before=before: steps.viewport().height() < before, timeout=2000)
        assert steps.viewport().rect().contains(steps.visualRect(current)), height


def test_a_new_sentence_repaints_the_chips_and_replay_but_not_the_panel_beneath_them(panel, bundle, qtbot):
    """The summary, slider and scroll bars do not paint their own background: each half of the panel
    does, so a new sentence repaints from there down, not the panel (or the dock and window under it)."""
    from PySide6.QtCore import QEvent, QObject

    class Paints(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.widgets: list[str] = []

        def eventFilter(self, watched, event):  # noqa: N802 (Qt's name)
            if event.type() == QEvent.Type.Paint:
                self.widgets.append("panel" if watched is panel else "chips" if watched is panel.chips else "slider")
            return False

    runner = NumpyRunner(bundle)
    panel.set_trace(analyse(runner, "the cat sat on the mat"))
    qtbot.wait(50)
    paints = Paints()
    for widget in (panel, panel.chips, panel.slider):
        widget.installEventFilter(paints)
    panel.set_trace(analyse(runner, "订单成交，订单取消，the dog ran off"))
    qtbot.waitUntil(lambda: {"chips", "slider"} <= set(paints.widgets))
    qtbot.wait(50)
    assert "panel" not in paints.widgets
