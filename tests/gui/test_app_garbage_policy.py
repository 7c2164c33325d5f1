"""Importing gui.app turns automatic garbage collection off: the app collects on a timer of the GUI thread
(gui.app.collect_garbage_on_this_thread), and start-up's imports do not pay for ~180 automatic passes.
The timer's collection waits while the panels draw (an update under way), for a bounded while."""
from __future__ import annotations

import os
import weakref
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel

import gui.app as app_module
from gui.panels import base
from gui.panels.base import Panel

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_app_leaves_automatic_collection_off():
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    shown = subprocess.run([sys.executable, "-c", "import gc; assert gc.isenabled(); import gui.app; print(gc.isenabled())"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["False"]


# ---------------------------------------------------------------- the collector's timing (no clock is read)

class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def collections(monkeypatch):
    """The generations gui.app asks gc to collect, instead of collecting; every count past its threshold."""
    asked: list[int] = []
    monkeypatch.setattr(app_module.gc, "collect", asked.append)
    monkeypatch.setattr(app_module.gc, "get_count", lambda: (701, 11, 11))
    monkeypatch.setattr(app_module.gc, "get_threshold", lambda: (700, 10, 10))
    return asked


def made_collector(qapp, busy, clock):
    collector = app_module.IdleCollector(busy, clock)
    collector._timer.stop()   # the test calls check() itself
    return collector


def test_the_collector_waits_while_the_panels_draw_and_collects_once_they_stop(qapp, collections):
    drawing, clock = [True], FakeClock()
    collector = made_collector(qapp, lambda: drawing[0], clock)
    collector.check()
    assert collections == []
    assert collector._timer.interval() == round(app_module.GC_QUIET_S * 1000)   # it looks again soon
    drawing[0] = False
    clock.now += app_module.GC_QUIET_S
    collector.check()
    assert collections == [2]
    assert collector._timer.interval() == round(app_module.GC_EVERY_S * 1000)


def test_the_collector_puts_a_collection_off_only_so_long(qapp, collections):
    clock = FakeClock()
    collector = made_collector(qapp, lambda: True, clock)
    collector.check()
    clock.now += app_module.GC_PUT_OFF_AT_MOST_S / 2
    collector.check()
    assert collections == []
    clock.now += app_module.GC_PUT_OFF_AT_MOST_S / 2
    collector.check()   # drawing without a pause all along: collected all the same
    assert collections == [2]


def test_only_the_generations_past_their_thresholds_are_collected(monkeypatch):
    monkeypatch.setattr(app_module.gc, "get_threshold", lambda: (700, 10, 10))
    counts = {(10, 0, 0): None, (701, 3, 0): 0, (701, 11, 3): 1, (701, 11, 11): 2, (701, 3, 11): 0}
    for count, generation in counts.items():
        monkeypatch.setattr(app_module.gc, "get_count", lambda count=count: count)
        assert app_module.due_generation() == generation


class Quiet(Panel):
    object_name = "quiet"

    def __init__(self) -> None:
        super().__init__()
        self.set_content(QLabel("drawn"))

    def draw(self) -> None:
        pass

    def figures(self):
        return []


def test_a_frame_drawn_just_now_counts_as_drawing_lately(qtbot, qapp):
    panel = Quiet()
    qtbot.addWidget(panel)
    panel.show()
    panel.post_trace(None, base.Selection())
    assert base.drawing_lately(0.0)   # posted: a frame is due
    qtbot.waitUntil(lambda: not panel.has_posted())
    qtbot.waitUntil(lambda: not base.drawing_lately(0.0))   # drawn, then painted
    assert base.drawing_lately(3600.0)   # ... just now


class Worker:
    def __init__(self) -> None:
        self.running = True

    def busy(self) -> bool:
        return self.running


def test_the_collector_also_waits_for_a_busy_worker_without_keeping_it(qapp, collections):

    worker, clock = Worker(), FakeClock()
    collector = made_collector(qapp, lambda: False, clock)
    collector.wait_while(worker.busy)
    collector.check()
    assert collections == []
    worker.running = False
    collector.check()
    assert collections == [2]
    gone = weakref.ref(worker)
    del worker
    assert gone() is None   # the collector held only a weak reference
    collector.check()       # and a worker gone is not busy
    assert collections == [2, 2]
