"""The frame clock's leading edge: posted to while idle, panels draw at the event loop's next pass
(no timer, before the paint Qt has pending); posted to again within a frame, they wait for its end
and draw the newest trace once. Counts draws, never times."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QLabel

from gui.panels import base
from gui.panels.base import Panel
from gui.selection import Selection

SENTENCES = ("The cat sat.", "订单成交。", "The cat sat on the mat.")


class CountingPanel(Panel):
    object_name = "counting"

    def __init__(self) -> None:
        super().__init__()
        self.set_content(QLabel("drawn"))
        self.draws: list[object] = []
        self.refresh()

    def draw(self) -> None:
        self.draws.append(self.trace)

    def figures(self):
        return []


@pytest.fixture(scope="module")
def traces(analysed):
    return [analysed(text) for text in SENTENCES]


def test_an_idle_clock_draws_at_the_next_pass_of_the_event_loop(qtbot, show, traces):
    panel = show(CountingPanel())
    qtbot.wait(50)   # more than a frame since any earlier draw: the clock is idle
    panel.post_trace(traces[0], Selection())
    panel.post_trace(traces[1], Selection())   # the same pass: drawn together with the first
    assert panel.draws == []
    QCoreApplication.sendPostedEvents()        # one pass over the posted events, no timer
    assert panel.draws == [traces[1]] and not panel.has_posted()


def test_posts_within_a_frame_wait_for_its_end_and_draw_the_newest_once(qtbot, show, traces, monkeypatch):
    monkeypatch.setattr(base, "FRAME_S", 0.3)   # a long frame, so that the next posts surely fall inside it
    panel = show(CountingPanel())
    qtbot.wait(350)
    panel.post_trace(traces[0], Selection())
    QCoreApplication.sendPostedEvents()
    assert panel.draws == [traces[0]]
    panel.post_trace(traces[1], Selection())
    panel.post_trace(traces[2], Selection())
    QCoreApplication.sendPostedEvents()
    assert panel.draws == [traces[0]] and panel.has_posted()   # inside the frame: waiting
    qtbot.waitUntil(lambda: not panel.has_posted(), timeout=5000)
    assert panel.draws == [traces[0], traces[2]]
