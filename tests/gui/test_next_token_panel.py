"""The Next-token panel: the bars are the model's next-token distribution, the controls are core.sampling's."""
from __future__ import annotations

import csv
import io
from dataclasses import replace

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

from core.runners import NumpyRunner
from core.sampling import CANDIDATES_HEADER, SamplingSettings, candidate_distribution
from core.session import analyse
from core.tokenizer import BYTE_ENCODER
from gui.candidate_bars import CANDIDATE_AXIS_SLACK, RULED_OUT_FILL
from gui.panels.next_token_panel import LABEL_COLUMNS, NextTokenPanel
from gui.text_fit import elide
from gui.token_axis import SIZE_SLACK
from gui.selection import Selection


@pytest.fixture(scope="module")
def english_trace(bundle):
    return analyse(NumpyRunner(bundle), "The cat sat on the mat and looked at the")


@pytest.fixture(scope="module")
def chinese_trace(bundle):
    return analyse(NumpyRunner(bundle), "我想查询一下我的订单状态")


@pytest.fixture
def panel(show):
    return show(NextTokenPanel(), 640, 520)


def _expected_top(trace, position: int, n: int):
    probs = trace.next_token_probs(position)
    ids = np.argsort(-probs, kind="stable")[:n]
    return ids, probs[ids]


def _drawn_bars(panel: NextTokenPanel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, raw widths, after widths) as drawn, in probability units."""
    raw = panel.chart.raw_bars.opts
    return np.asarray(raw["y"]), np.asarray(raw["width"]) / 100, np.asarray(panel.chart.after_bars.opts["width"]) / 100


def _left_labels(panel: NextTokenPanel) -> list[str]:
    return panel.chart.getPlotItem().getAxis("left").labels()


def _row_view_point(panel: NextTokenPanel, row: int):
    """Where row `row` is on screen (middle of its bar), in the chart viewport's coordinates."""
    vb = panel.chart.getPlotItem().vb
    x = vb.viewRange()[0][1] * 0.02
    return panel.chart.mapFromScene(vb.mapViewToScene(QPointF(x, row + 0.5)))


def _set_settings(panel: NextTokenPanel, s: SamplingSettings) -> None:
    panel.temperature.setValue(s.temperature)
    panel.top_k.setValue(s.top_k)
    panel.top_p.setValue(s.top_p)
    panel.greedy.setChecked(s.greedy)
    panel.sampled.setChecked(not s.greedy)


def test_bars_are_the_top_candidates_of_the_last_position_in_order(panel, english_trace):
    panel.bar_count.setValue(8)
    panel.set_trace(english_trace)
    ids, probs = _expected_top(english_trace, english_trace.n_tokens - 1, 8)
    np.testing.assert_array_equal(panel.candidates.ids, ids)
    rows, raw, after = _drawn_bars(panel)
    np.testing.assert_array_equal(rows, np.arange(8) + 0.5)   # row i: the unit cell [i, i+1)
    np.testing.assert_allclose(raw, probs, rtol=1e-6)
    np.testing.assert_allclose(after, probs / 1.0, rtol=1e-6)  # default settings: nothing is ruled out
    assert _left_labels(panel)[0].startswith(elide(english_trace.vocab_label(int(ids[0])), LABEL_COLUMNS))
    last = english_trace.n_tokens - 1
    assert f"position {last}" in panel.header.text() and english_trace.label(last) in panel.header.text()


def test_probability_text_is_beside_each_bar(panel, english_trace):
    panel.set_trace(english_trace)
    right = panel.chart.getPlotItem().getAxis("right").labels()
    first = float(panel.candidates.probability[0])
    assert len(right) == len(panel.candidates.ids)
    assert right[0] == f"{first:.1%} → {first:.1%}"


def test_selected_query_position_is_used(panel, english_trace):
    panel.set_trace(english_trace)
    panel.set_selection(Selection(query=2))
    ids, probs = _expected_top(english_trace, 2, panel.bar_count.value())
    np.testing.assert_array_equal(panel.candidates.ids, ids)
    np.testing.assert_allclose(_drawn_bars(panel)[1], probs, rtol=1e-6)
    assert "position 2" in panel.header.text() and english_trace.label(2) in panel.header.text()
    panel.set_selection(Selection(query=None))
    assert panel.position == english_trace.n_tokens - 1


@pytest.mark.parametrize("s", [
    SamplingSettings(temperature=1.0, top_k=3),
    SamplingSettings(temperature=0.5, top_p=0.3),
    SamplingSettings(temperature=2.0, top_k=6, top_p=0.5),
    SamplingSettings(temperature=3.0, top_p=0.05),
    SamplingSettings(greedy=True),
])
def test_settings_mark_samplable_bars_as_core_sampling_does(panel, chinese_trace, s):
    panel.bar_count.setValue(12)
    panel.set_trace(chinese_trace)
    _set_settings(panel, s)
    logits = chinese_trace.logits[-1]
    expected = candidate_distribution(logits, s)[panel.candidates.ids]
    np.testing.assert_array_equal(panel.candidates.in_sampling_set, expected > 0)
    np.testing.assert_allclose(_drawn_bars(panel)[2], expected, rtol=1e-6)
    greyed = [brush.color() == RULED_OUT_FILL for brush in panel.chart.raw_bars.opts["brushes"]]
    assert greyed == list(expected == 0)
    assert f"Sampling can pick {int(np.count_nonzero(expected))} of the 12" in panel.settings_line.text()


def test_tightening_top_k_live_greys_out_more_bars(panel, english_trace):
    panel.set_trace(english_trace)
    assert panel.candidates.in_sampling_set.all()
    panel.top_k.setValue(2)
    assert panel.candidates.in_sampling_set.tolist() == [True, True] + [False] * (len(panel.candidates.ids) - 2)
    panel.top_k.setValue(0)
    assert panel.candidates.in_sampling_set.all()


def test_clicking_a_bar_appends_its_token(panel, english_trace, qtbot):
    panel.set_trace(english_trace)
    with qtbot.waitSignal(panel.sigAppendTokens) as blocker:
        qtbot.mouseClick(panel.chart.viewport(), Qt.LeftButton, pos=_row_view_point(panel, 2))
    assert blocker.args == [[int(panel.candidates.ids[2])]]


@pytest.mark.parametrize("key, row", [(Qt.Key_1, 0), (Qt.Key_4, 3), (Qt.Key_9, 8)])
def test_number_key_on_the_chart_appends_that_rank(panel, english_trace, qtbot, key, row):
    panel.set_trace(english_trace)
    panel.chart.setFocus()
    with qtbot.waitSignal(panel.sigAppendTokens) as blocker:
        qtbot.keyClick(panel.chart, key)
    assert blocker.args == [[int(panel.candidates.ids[row])]]


def test_arrow_keys_and_enter_append_the_highlighted_row(panel, english_trace, qtbot):
    panel.set_trace(english_trace)
    panel.chart.setFocus()
    qtbot.keyClick(panel.chart, Qt.Key_Down)
    qtbot.keyClick(panel.chart, Qt.Key_Down)
    assert panel.chart.cursor_band.opts["y"] == [2.5]  # the highlight follows the keys
    with qtbot.waitSignal(panel.sigAppendTokens) as blocker:
        qtbot.keyClick(panel.chart, Qt.Key_Return)
    assert blocker.args == [[int(panel.candidates.ids[2])]]
    with qtbot.waitSignal(panel.sigAppendTokens) as blocker:
        qtbot.mouseClick(panel.append_button, Qt.LeftButton)
    assert blocker.args == [[int(panel.candidates.ids[2])]]


def test_the_highlight_follows_a_new_sentence_and_leaves_with_the_focus(panel, english_trace, chinese_trace, qtbot):
    panel.set_trace(english_trace)
    panel.chart.setFocus()
    qtbot.keyClick(panel.chart, Qt.Key_Down)
    panel.set_trace(chinese_trace)   # a new sentence: the band spans the new chart's width
    assert panel.chart.cursor_band.opts["width"] == [panel.chart.getPlotItem().vb.viewRange()[0][1]]
    panel.chart.clearFocus()
    assert len(panel.chart.cursor_band.opts["y"]) == 0


def test_appending_is_refused_for_an_earlier_position(panel, english_trace, qtbot):
    """Appending adds to the end of the sentence, so a bar of an earlier position must not append."""
    panel.set_trace(english_trace)
    panel.set_selection(Selection(query=1))
    assert not panel.append_button.isEnabled() and panel.show_last_button.isVisible()
    with qtbot.assertNotEmitted(panel.sigAppendTokens):
        qtbot.mouseClick(panel.chart.viewport(), Qt.LeftButton, pos=_row_view_point(panel, 0))
    with qtbot.waitSignal(panel.sigSelect) as blocker:
        qtbot.mouseClick(panel.show_last_button, Qt.LeftButton)
    assert blocker.args == [{"query": None, "key": None}]


def test_earlier_position_marks_the_token_the_sentence_really_has(panel, chinese_trace):
    def rank_of_actual(q: int) -> int:
        return int(np.flatnonzero(np.argsort(-chinese_trace.logits[q], kind="stable")
                                  == chinese_trace.input_ids[q + 1])[0])

    q = min(range(chinese_trace.n_tokens - 1), key=rank_of_actual)  # where the real next token ranks best
    rank = rank_of_actual(q)
    panel.resize(640, 1400)  # tall enough that no row label is thinned out
    panel.bar_count.setValue(rank + 3)
    panel.set_trace(chinese_trace)
    panel.set_selection(Selection(query=q))
    actual = int(chinese_trace.input_ids[q + 1])
    assert f"“{chinese_trace.vocab_label(actual)}”, rank {rank + 1} (marked ✓)" in panel.header.text()
    marked = [i for i, text in enumerate(_left_labels(panel)) if "✓" in text]
    assert marked == [rank] and int(panel.candidates.ids[rank]) == actual


def test_generate_emits_count_and_settings(panel, english_trace, qtbot):
    panel.set_trace(english_trace)
    _set_settings(panel, SamplingSettings(temperature=0.7, top_k=5, top_p=0.9))
    panel.seed.setValue(42)
    panel.generate_count.setValue(12)
    with qtbot.waitSignal(panel.sigGenerate) as blocker:
        qtbot.mouseClick(panel.generate_button, Qt.LeftButton)
    n, s = blocker.args[0]
    assert n == 12
    assert s == SamplingSettings(temperature=0.7, top_k=5, top_p=0.9, greedy=False, seed=42)
    panel.greedy.setChecked(True)
    with qtbot.waitSignal(panel.sigGenerate) as blocker:
        qtbot.mouseClick(panel.generate_button, Qt.LeftButton)
    assert blocker.args[0][1].greedy


def test_step_back_emits_once_there_is_something_to_take_back(panel, english_trace, qtbot):
    panel.set_trace(english_trace)
    assert not panel.step_back_button.isEnabled()   # only typed text: the controller says otherwise
    panel.set_can_step_back(True)
    with qtbot.waitSignal(panel.sigStepBack):
        qtbot.mouseClick(panel.step_back_button, Qt.LeftButton)


def test_empty_trace_shows_an_empty_state(panel, english_trace, qtbot):
    panel.set_trace(english_trace)
    panel.set_trace(None)
    assert panel.candidates is None and panel.showing_empty_state()
    assert not panel.chart.isVisible()
    assert len(panel.chart.raw_bars.opts["width"]) == 0
    assert panel.bars_csv().splitlines() == [",".join(CANDIDATES_HEADER)]
    with qtbot.assertNotEmitted(panel.sigAppendTokens):
        qtbot.keyClick(panel.chart, Qt.Key_1)


def test_csv_holds_what_the_bars_show(panel, chinese_trace):
    panel.set_trace(chinese_trace)
    _set_settings(panel, SamplingSettings(top_k=4))
    (figure,) = panel.figures()
    assert figure.name == "next_token_bars" and figure.widget is panel.figure_box
    rows = list(csv.reader(io.StringIO(figure.table())))
    assert tuple(rows[0]) == CANDIDATES_HEADER
    c = panel.candidates
    assert [int(r[1]) for r in rows[1:]] == c.ids.tolist()
    assert [r[2] for r in rows[1:]] == [chinese_trace.vocab_label(int(i)) for i in c.ids]
    np.testing.assert_allclose([float(r[3]) for r in rows[1:]], c.probability)
    np.testing.assert_allclose([float(r[4]) for r in rows[1:]], c.after)
    assert [r[5] for r in rows[1:]] == ["true"] * 4 + ["false"] * (len(c.ids) - 4)


def test_candidate_labels_are_readable_pieces(panel, chinese_trace, bundle):
    """Whole Chinese characters show as glyphs, byte fragments as hex, every vocab id has a label."""
    tokenizer = bundle.tokenizer
    labels = chinese_trace.vocab_labels
    assert len(labels) == chinese_trace.config.vocab_size
    (single,) = tokenizer.encode("的")
    assert labels[single] == "的"
    assert labels[tokenizer.piece_to_id(BYTE_ENCODER[0xE8])] == "‹e8›"
    panel.set_trace(chinese_trace)
    assert len(_left_labels(panel)) == len(panel.candidates.ids)
    for token_id, text in zip(panel.candidates.ids, _left_labels(panel)):
        assert text.startswith(elide(labels[int(token_id)], LABEL_COLUMNS))


def test_many_bars_thin_the_labels_but_keep_rank_one(panel, english_trace, qtbot):
    panel.resize(560, 420)
    panel.bar_count.setValue(50)
    panel.set_trace(english_trace)
    qtbot.wait(10)  # let the layout settle; the labels follow the view's height
    plot = panel.chart.getPlotItem()
    low, high = plot.vb.viewRange()[1]

    def rows(side: str) -> list[float]:
        ((_, values),) = plot.getAxis(side).tickValues(low, high, plot.vb.height())
        return values

    assert rows("left")[0] == 0.5 and 1 < len(rows("left")) < 50
    assert rows("right") == rows("left")


def test_every_bar_has_its_rank_label(panel, english_trace):
    panel.bar_count.setValue(10)
    panel.set_trace(english_trace)
    assert [label.rsplit("[", 1)[1] for label in _left_labels(panel)] == [f"{rank}]" for rank in range(1, 11)]


def test_labels_fall_back_to_ids_without_vocab_labels(panel, english_trace):
    panel.set_trace(replace(english_trace, vocab_labels=()))
    assert _left_labels(panel)[0].startswith(f"#{int(panel.candidates.ids[0])}")


def test_candidate_labels_draw_with_the_bundled_cjk_font(panel):
    """Axis labels are painted by pyqtgraph, not by a QLabel: their font must carry the CJK fallback."""
    from gui.fonts import register_fonts

    family = register_fonts()
    for side in ("left", "right"):
        assert family in panel.chart.getPlotItem().getAxis(side).style["tickFont"].families()


def test_a_short_dock_scrolls_instead_of_dropping_rank_labels(panel, bundle, english_trace, qtbot):
    """With interventions on, the before/after chart joins the page: both keep a label per row."""
    mask = np.ones((bundle.config.num_hidden_layers, bundle.config.num_attention_heads), dtype=np.float32)
    mask[-1] = 0
    intervened = analyse(NumpyRunner(bundle), "The cat sat on the mat and looked at the", head_mask=mask)
    panel.resize(560, 420)
    panel.bar_count.setValue(10)
    panel.set_trace(intervened)
    panel.set_variant("full", english_trace)
    qtbot.wait(10)
    for view, rows in ((panel.chart, 10), (panel.effect, len(panel.effect.change.ids))):
        plot = view.getPlotItem()
        low, high = plot.vb.viewRange()[1]
        ((_, values),) = plot.getAxis("left").tickValues(low, high, plot.vb.height())
        assert len(values) == rows, type(view).__name__


def test_a_new_last_token_in_the_header_does_not_lay_the_page_out_again(panel, bundle, qtbot):
    """The header's longest word is the token in quotes; were it the header's least width, a sentence
    ending in a longer or shorter token would change the page's least size and relayout the window."""
    from PySide6.QtCore import QEvent, QObject

    class LayoutRequests(QObject):
        count = 0

        def eventFilter(self, watched, event):  # noqa: N802 (Qt's name)
            if event.type() == QEvent.Type.LayoutRequest:
                self.count += 1
            return False

    runner = NumpyRunner(bundle)
    texts = ["The cat sat on the mat and looked at the", "我想查询一下我的订单状态", "cat", "订单"]
    traces = [analyse(runner, text) for text in texts]
    assert len({trace.label(trace.n_tokens - 1) for trace in traces}) == len(texts)
    panel.set_trace(traces[0])
    qtbot.wait(50)
    requests = LayoutRequests()
    panel.figure_box.installEventFilter(requests)
    for trace in traces[1:] + traces[:1]:
        panel.set_trace(trace)
        assert panel.header.text().startswith(f"Next token after “{trace.label(trace.n_tokens - 1)}”")
        qtbot.wait(20)
    assert requests.count == 0



def test_the_bars_keep_their_place_when_a_new_sentence_has_narrower_candidates(panel, english_trace):
    """The candidates' labels change far more than a sentence's own tokens: the label axis keeps its width
    (and the bars their place) while the widest label is within CANDIDATE_AXIS_SLACK of it."""
    axis = panel.chart.getPlotItem().getAxis("left")
    panel.set_trace(english_trace)
    width, texts = axis.fixedWidth, axis.label_texts().width
    widest = max(map(texts, _left_labels(panel)))
    one_letter = replace(english_trace, vocab_labels=tuple(label[:1] for label in english_trace.vocab_labels))
    panel.set_trace(one_letter)
    narrowest = max(map(texts, _left_labels(panel)))
    assert SIZE_SLACK < widest - narrowest <= CANDIDATE_AXIS_SLACK   # a plain token axis would narrow here
    assert axis.fixedWidth == width
