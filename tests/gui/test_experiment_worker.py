"""Experiments have a worker thread of their own: a keystroke during a running sweep is analysed before the sweep ends.

The sweep is held at its first progress report by an event the test controls (a delay hook, not a
clock): with one shared worker the new sentence could not be analysed until the sweep let go.
"""
from __future__ import annotations

import threading

import pytest

import core.experiment_runs as experiment_runs
from core.patching import run_all_sweeps
from gui.controller import EXPERIMENT_WORKER_NAME
from gui.experiment_job import ExperimentJob

A, B = "订单成功了。订单", "订单取消了。订单"
HOLD_S = 60   # the hook lets go after this long whatever happens, so a failing test cannot hang


@pytest.fixture()
def window(shipped_window):
    return shipped_window(A, 1280, 800)


@pytest.fixture()
def held_sweep(monkeypatch):
    """Sweeps that stop after their first run until `release` is set; `reached` is set once they are held."""
    reached, release, threads = threading.Event(), threading.Event(), []

    def held(runner, pair, progress=None):
        def report(done: int, total: int) -> None:
            progress(done, total)
            if not reached.is_set():
                threads.append(threading.current_thread().name)
                reached.set()
                release.wait(HOLD_S)

        return run_all_sweeps(runner, pair, report)

    monkeypatch.setattr(experiment_runs, "run_all_sweeps", held)
    yield reached, release, threads
    release.set()


def start_sweep(qtbot, window, reached):
    window.docks["patching"].show()
    window.docks["patching"].raise_()
    panel = window.panel("patching")
    qtbot.waitUntil(lambda: panel.trace is window.controller.trace, timeout=10000)
    panel.corrupt_edit.setText(B)
    panel.run_button.click()
    qtbot.waitUntil(reached.is_set, timeout=30000)
    return panel


def test_a_text_change_during_a_sweep_is_analysed_before_the_sweep_ends(qtbot, window, held_sweep):
    reached, release, threads = held_sweep
    panel = start_sweep(qtbot, window, reached)
    assert threads == [EXPERIMENT_WORKER_NAME]
    qtbot.waitUntil(lambda: panel.progress.value() == 1, timeout=10000)   # the progress bar shows the held run

    window.sentence_bar.setText("订单取消了")
    qtbot.waitUntil(lambda: window.controller.trace.text == "订单取消了", timeout=20000)
    assert panel.job is not None and panel.result is None   # the sweep is still held
    assert panel.cancel_button.isEnabled()

    release.set()
    qtbot.waitUntil(lambda: panel.result is not None, timeout=60000)
    assert panel.progress.value() == panel.progress.maximum() > 1
    assert panel.run_button.isEnabled() and not panel.cancel_button.isEnabled()


def test_cancel_still_ends_a_held_sweep(qtbot, window, held_sweep):
    reached, release, _ = held_sweep
    panel = start_sweep(qtbot, window, reached)
    panel.cancel_button.click()
    release.set()
    qtbot.waitUntil(lambda: panel.job is None, timeout=30000)
    assert panel.result is None and "cancelled" in panel.summary.text()


def test_closing_the_window_during_a_held_experiment_stops_both_workers(qtbot, window):
    started, release = threading.Event(), threading.Event()
    outcomes = []

    def held(runner):
        started.set()
        release.wait(HOLD_S)
        job.progress(1, 2)   # the checkpoint: the app is closing, so this raises
        return "finished"

    job = ExperimentJob(held, outcomes.append, outcomes.append)
    window.controller.run_experiment(job)
    qtbot.waitUntil(started.is_set, timeout=10000)
    window.controller.shutdown()
    release.set()
    qtbot.waitUntil(lambda: not window.controller.is_running(), timeout=10000)
    qtbot.wait(50)
    assert outcomes == []   # nothing is posted once the controller has shut down
