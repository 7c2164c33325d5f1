"""The logit lens and the parity report are computed on the model worker, never on the UI thread;
the panel says it is computing meanwhile and ends up showing the readout of the newest trace."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import core.logit_lens
import core.parity_report
from gui.main_window import MainWindow
from tests.gui.qt_helpers import type_text

WAIT_MS = 20000


def recording(monkeypatch, module, name: str, core_fn, gate: threading.Event | None = None) -> list:
    """Replace module.name by core_fn that records the thread it runs on (and waits for gate, if given)."""
    threads: list[threading.Thread] = []

    def recorded(*args):
        threads.append(threading.current_thread())
        if gate is not None:
            assert gate.wait(WAIT_MS / 1000), "the test never opened the gate"
        return core_fn(*args)

    monkeypatch.setattr(module, name, recorded)
    return threads


def show_dock(window: MainWindow, name: str):
    window.docks[name].raise_()
    window.bring_all_up_to_date()
    return window.panel(name)


@pytest.mark.parametrize("name, module_name, core_fn, shown", [
    ("logit_lens", "gui.panels.logit_lens_panel", core.logit_lens.logit_lens, lambda panel: panel.lens),
    ("parity", "gui.panels.parity_panel", core.parity_report.parity_report, lambda panel: panel.rows or None),
])
def test_the_readout_runs_on_the_worker_and_the_panel_says_it_is_computing(qtbot, monkeypatch, make_window,
                                                                           name, module_name, core_fn, shown):
    import importlib

    gate = threading.Event()
    function = "logit_lens" if name == "logit_lens" else "parity_report"
    threads = recording(monkeypatch, importlib.import_module(module_name), function, core_fn, gate)
    window = make_window("both")
    panel = show_dock(window, name)
    type_text(qtbot, window, "The cat sat on the mat.")
    panel = show_dock(window, name)
    qtbot.waitUntil(lambda: bool(threads), timeout=WAIT_MS)
    assert panel.showing_empty_state() and panel.empty.text().startswith("Computing")
    gate.set()
    qtbot.waitUntil(lambda: shown(panel) is not None, timeout=WAIT_MS)
    assert not panel.showing_empty_state()
    assert threads and all(t is not threading.main_thread() for t in threads)
    assert {t.name for t in threads} == {"glassbox-model-worker"}


def test_the_logit_lens_shown_is_the_newest_traces_after_a_slow_one(qtbot, monkeypatch, make_window):
    import gui.panels.logit_lens_panel as lens_panel

    gate = threading.Event()
    threads = recording(monkeypatch, lens_panel, "logit_lens", core.logit_lens.logit_lens, gate)
    window = make_window("numpy")
    panel = show_dock(window, "logit_lens")
    type_text(qtbot, window, "The cat sat.")
    qtbot.waitUntil(lambda: len(threads) == 1, timeout=WAIT_MS)   # the first lens is held at the gate
    window.sentence_bar.setText("订单成交了吗？订单")           # typed while the first lens is computing
    qtbot.wait(100)
    gate.set()
    qtbot.waitUntil(lambda: window.controller.trace.text == "订单成交了吗？订单" and panel.lens is not None
                    and panel.trace is window.controller.trace and not window.controller.busy(), timeout=WAIT_MS)
    qtbot.wait(200)   # anything still queued arrives by now
    newest = window.controller.trace
    assert panel.trace is newest
    assert np.array_equal(panel.lens.probs, core.logit_lens.logit_lens(newest).probs)
    assert f"position {newest.n_tokens - 1}" in panel.position_title.text()


class FakeWorker:
    """The controller's compute_readout, run by hand: jobs wait until the test runs them, stale ones are skipped."""

    def __init__(self) -> None:
        self.jobs: list = []

    def submit(self, fn, on_done, on_error, is_stale) -> None:
        self.jobs.append((fn, on_done, is_stale, on_error))

    def run(self, index: int) -> None:
        fn, on_done, is_stale, on_error = self.jobs[index]
        if is_stale():
            return
        try:
            result = fn()
        except ValueError as exc:
            on_error(str(exc))
        else:
            on_done(result)


def test_a_newer_trace_supersedes_a_pending_lens(show, analysed):
    from gui.panels.logit_lens_panel import LogitLensPanel

    worker = FakeWorker()
    panel = show(LogitLensPanel())
    panel.readout.use_worker(worker.submit)
    old, new = analysed("The cat sat."), analysed("订单成交了吗？订单")
    panel.set_trace(old)
    assert panel.showing_empty_state() and panel.empty.text().startswith("Computing")
    panel.set_trace(new)                      # before the old lens was computed
    assert len(worker.jobs) == 2 and worker.jobs[0][2]() and not worker.jobs[1][2]()
    worker.run(0)                             # stale: skipped, as the controller's worker skips it
    assert panel.lens is None and panel.showing_empty_state()
    worker.run(1)
    assert not panel.showing_empty_state()
    assert np.array_equal(panel.lens.probs, core.logit_lens.logit_lens(new).probs)
    panel.set_selection(panel.selection.updated(query=0))   # a selection change computes nothing new
    assert len(worker.jobs) == 2


def test_a_readout_that_fails_says_why_and_is_not_retried_for_the_same_traces(show, analysed, monkeypatch):
    import gui.panels.logit_lens_panel as lens_panel

    def broken(trace):
        raise ValueError("no final norm in this trace")

    monkeypatch.setattr(lens_panel, "logit_lens", broken)
    worker = FakeWorker()
    panel = show(lens_panel.LogitLensPanel())
    panel.readout.use_worker(worker.submit)
    panel.set_trace(analysed("The cat sat."))
    worker.run(0)
    assert panel.showing_empty_state()
    assert panel.empty.text() == "Could not compute the logit lens of this sentence: no final norm in this trace"
    panel.set_selection(panel.selection.updated(query=0))
    assert len(worker.jobs) == 1
