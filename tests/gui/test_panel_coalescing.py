"""Store-then-draw: a panel posted to stores the newest trace and selection and draws them once per
frame; flush() draws them now. Counts draws, never times."""
from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel

from gui.panels.base import Panel
from gui.selection import Selection
from tests.gui.qt_helpers import settled, type_text

SENTENCES = ("The cat sat.", "订单成交。", "The cat sat on the mat.")


class CountingPanel(Panel):
    """Records what each draw saw."""
    object_name = "counting"

    def __init__(self) -> None:
        super().__init__()
        self.set_content(QLabel("drawn"))
        self.draws: list[tuple[object, Selection]] = []
        self.refresh()

    def draw(self) -> None:
        self.draws.append((self.trace, self.selection))

    def figures(self):
        return []


class FailingPanel(CountingPanel):
    object_name = "failing"

    def draw(self) -> None:
        raise RuntimeError("cannot draw this")


@pytest.fixture(scope="module")
def traces(analysed):
    return [analysed(text) for text in SENTENCES]


def test_posts_within_one_frame_are_drawn_once_and_flush_draws_the_newest(show, traces):
    panel = show(CountingPanel())
    for trace in traces:
        panel.post_trace(trace, Selection(layer=0, head=0))
    assert panel.draws == [] and panel.has_posted()
    panel.flush()
    assert [trace for trace, _ in panel.draws] == [traces[-1]]
    assert not panel.has_posted()
    panel.flush()   # nothing waits: no second draw
    assert len(panel.draws) == 1


def test_the_event_loop_draws_posted_traces_once(qtbot, show, traces):
    panel = show(CountingPanel())
    for trace in traces:
        panel.post_trace(trace, Selection())
    qtbot.waitUntil(lambda: not panel.has_posted())
    qtbot.wait(50)   # past a frame: nothing more to draw
    assert [trace for trace, _ in panel.draws] == [traces[-1]]
    assert panel.trace is traces[-1]


def test_a_selection_posted_after_a_trace_is_drawn_with_it(show, traces):
    panel = show(CountingPanel())
    panel.post_trace(traces[0], Selection(head=0))
    panel.post_selection(Selection(head=1))
    panel.post_selection(Selection(head=2))
    panel.flush()
    assert panel.draws == [(traces[0], Selection(head=2))]
    panel.post_selection(Selection(head=3))   # a selection alone redraws the trace already there
    panel.flush()
    assert panel.draws[-1] == (traces[0], Selection(head=3))


def test_set_trace_still_draws_at_once(show, traces):
    panel = show(CountingPanel())
    panel.set_trace(traces[0])
    assert [trace for trace, _ in panel.draws] == [traces[0]]


def test_a_failing_posted_draw_reports_and_leaves_nothing_waiting(qtbot, show, traces, monkeypatch):
    panel = show(FailingPanel())
    errors = []
    monkeypatch.setattr("sys.excepthook", lambda *info: errors.append(info[1]))
    with qtbot.waitSignal(panel.sigDrawFailed, timeout=5000):
        panel.post_trace(traces[0], Selection())
    assert isinstance(errors[0], RuntimeError) and not panel.has_posted()


def test_the_window_draws_each_visible_panel_once_for_a_burst_of_results(qtbot, make_window, traces):
    window = make_window()
    type_text(qtbot, window, SENTENCES[0])
    tokens = window.panel("tokens")
    assert window.on_screen(tokens)
    drawn = []
    original = tokens.draw
    tokens.draw = lambda: (drawn.append(tokens.trace), original())
    for trace in traces:   # results faster than frames: all arrive before the event loop runs again
        window.controller.sigTraceChanged.emit(trace)
    assert drawn == []
    window.flush_redraws()
    assert drawn == [traces[-1]]
    assert tokens.chips.chip_count() == traces[-1].n_tokens   # what it shows is the newest trace


def test_settled_leaves_no_panel_with_a_posted_draw(qtbot, make_window):
    window = make_window()
    window.sentence_bar.setText(SENTENCES[1])
    qtbot.waitUntil(lambda: settled(window, SENTENCES[1]), timeout=20000)
    assert not any(panel.has_posted() for panel in window.panels)
    assert window.panel("tokens").chips.chip_count() == window.controller.trace.n_tokens
