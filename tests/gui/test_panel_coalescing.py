"""Store-then-draw: a panel posted to stores the newest trace and selection and draws them once per
frame; flush() draws them now. The frame clock's leading edge: posted to while idle, panels draw at
the event loop's next pass (no timer, before the paint Qt has pending); posted to again within a
frame, they wait for its end and draw the newest trace once. Counts draws, never times."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QLabel

from gui.panels import base
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


def drawn(panel) -> list:
    """The traces the panel drew, in order."""
    return [trace for trace, _ in panel.draws]


def test_an_idle_clock_draws_at_the_next_pass_of_the_event_loop(qtbot, show, traces):
    panel = show(CountingPanel())
    qtbot.wait(50)   # more than a frame since any earlier draw: the clock is idle
    panel.post_trace(traces[0], Selection())
    panel.post_trace(traces[1], Selection())   # the same pass: drawn together with the first
    assert drawn(panel) == []
    QCoreApplication.sendPostedEvents()        # one pass over the posted events, no timer
    assert drawn(panel) == [traces[1]] and not panel.has_posted()


def test_posts_within_a_frame_wait_for_its_end_and_draw_the_newest_once(qtbot, show, traces, monkeypatch):
    monkeypatch.setattr(base, "FRAME_S", 0.3)   # a long frame, so that the next posts surely fall inside it
    panel = show(CountingPanel())
    qtbot.wait(350)
    panel.post_trace(traces[0], Selection())
    QCoreApplication.sendPostedEvents()
    assert drawn(panel) == [traces[0]]
    panel.post_trace(traces[1], Selection())
    panel.post_trace(traces[2], Selection())
    QCoreApplication.sendPostedEvents()
    assert drawn(panel) == [traces[0]] and panel.has_posted()   # inside the frame: waiting
    qtbot.waitUntil(lambda: not panel.has_posted(), timeout=5000)
    assert drawn(panel) == [traces[0], traces[2]]


def test_a_frame_of_tokens_only_does_not_hold_back_the_result_that_follows(qtbot, show, traces, monkeypatch):
    """A run's tokens (posted unpaced, while the model runs) draw at once, and the run's trace a moment later
    draws at the next pass too: it does not wait for the rest of the tokens' frame."""
    monkeypatch.setattr(base, "FRAME_S", 0.3)
    tokens_panel, other = show(CountingPanel()), show(CountingPanel())
    qtbot.wait(350)
    tokens_panel.post_trace(traces[0], Selection(), paced=False)
    QCoreApplication.sendPostedEvents()
    assert drawn(tokens_panel) == [traces[0]]
    other.post_trace(traces[1], Selection())
    QCoreApplication.sendPostedEvents()
    assert drawn(other) == [traces[1]]   # no wait for the 0.3 s frame
    other.post_trace(traces[2], Selection())   # that frame counted: the next one waits for its end
    QCoreApplication.sendPostedEvents()
    assert drawn(other) == [traces[1]] and other.has_posted()
