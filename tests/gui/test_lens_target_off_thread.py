"""A lens target other than the model's own top token needs a position's [S, V] logits: they are computed
on the model worker, the target's cells say "computing…" meanwhile, and a newer target supersedes."""
from __future__ import annotations

import threading

import numpy as np

import core.logit_lens
from gui.panels.logit_lens_panel import COMPUTING, LogitLensPanel, format_probability
from tests.gui.qt_helpers import type_text
from tests.gui.test_readouts_off_thread import WAIT_MS, FakeWorker, show_dock

RANK, PROB = 1 + core.logit_lens.TOP_K, 2 + core.logit_lens.TOP_K   # the table's target columns


def target_cells(panel) -> list[tuple[str, str]]:
    return [(panel.table.item(s, RANK).text(), panel.table.item(s, PROB).text()) for s in range(panel.table.rowCount())]


def expected_cells(trace, position: int, target: int) -> list[tuple[str, str]]:
    ranks, probs = core.logit_lens.logit_lens(trace).target_ranks(position, target)
    return [(str(int(r)), format_probability(float(p))) for r, p in zip(ranks, probs)]


def not_the_top(lens, position: int) -> int:
    return int(lens.top_ids[-1, position, 1])   # the last stage's second most likely token


def test_a_targets_column_is_computed_on_the_worker_and_shown_as_core_ranks_it(qtbot, monkeypatch, make_window):
    threads: list[threading.Thread] = []
    column = core.logit_lens.LensLogits.column

    def recorded(self, position):
        threads.append(threading.current_thread())
        return column(self, position)

    monkeypatch.setattr(core.logit_lens.LensLogits, "column", recorded)
    window = make_window("numpy")
    panel = show_dock(window, "logit_lens")
    type_text(qtbot, window, "The cat sat on the mat.")
    qtbot.waitUntil(lambda: panel.lens is not None and panel.trace is window.controller.trace, timeout=WAIT_MS)
    assert not threads   # the default target (the model's own top token) needs no column
    target = not_the_top(panel.lens, panel.position)
    panel.target_box.setValue(target)
    qtbot.waitUntil(lambda: target_cells(panel)[0][0] != COMPUTING, timeout=WAIT_MS)
    assert threads and all(t.name == "glassbox-model-worker" for t in threads)
    assert target_cells(panel) == expected_cells(panel.trace, panel.position, target)


def test_the_target_says_computing_and_a_newer_target_supersedes(show, analysed):
    worker = FakeWorker()
    panel = show(LogitLensPanel())
    panel.readout.use_worker(worker.submit)
    trace = analysed("The cat sat.")
    panel.set_trace(trace)
    worker.run(0)                                   # the lens
    first, second = int(panel.lens.top_ids[-1, panel.position, 1]), int(panel.lens.top_ids[-1, panel.position, 2])
    panel.target_box.setValue(first)
    assert all(cells == (COMPUTING, COMPUTING) for cells in target_cells(panel))
    assert COMPUTING in panel.formation.text()
    panel.target_box.setValue(second)              # before the first target's column was computed
    assert len(worker.jobs) == 3 and worker.jobs[1][2]() and not worker.jobs[2][2]()
    worker.run(1)                                   # stale: skipped
    assert target_cells(panel)[0] == (COMPUTING, COMPUTING)
    worker.run(2)
    assert target_cells(panel) == expected_cells(trace, panel.position, second)
    assert COMPUTING not in panel.formation.text()
    panel.target_box.setValue(-1)                  # back to the top token: known, nothing new to compute
    assert len(worker.jobs) == 3 and target_cells(panel)[0][0] != COMPUTING


def test_a_job_knows_a_request_by_its_traces_identity_and_its_numbers_values():
    from gui.readout_job import ReadoutJob

    worker, lens = FakeWorker(), object()
    job = ReadoutJob(lambda: None)
    job.use_worker(worker.submit)
    position, target = int("700"), int("150000")          # made at run time: equal, not the same objects
    assert job.result_for(lambda *args: args, lens, position, target) is None
    assert job.result_for(lambda *args: args, lens, int("700"), np.int64(150000)) is None
    assert len(worker.jobs) == 1                           # the same request: still pending, not asked again
    job.result_for(lambda *args: args, object(), position, target)   # another lens: a new request
    assert len(worker.jobs) == 2
