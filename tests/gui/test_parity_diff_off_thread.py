"""The Parity panel's heatmap of the clicked field (T x V cells for the logits) is made on the model worker:
the title says it is computing meanwhile, and the newest click wins."""
from __future__ import annotations

import threading

from PySide6.QtCore import Qt

import gui.panels.parity_panel as parity_panel
from core.parity_report import difference_array
from core.runners import OnnxRunner
from core.session import analyse
from tests.gui.qt_helpers import type_text
from tests.gui.test_readouts_off_thread import WAIT_MS, FakeWorker, show_dock


def field_item(panel, field: str):
    return next(panel.table.item(r, c) for r in range(panel.table.rowCount())
                for c in range(1, panel.table.columnCount())
                if panel.table.item(r, c) is not None and panel.table.item(r, c).data(Qt.ItemDataRole.UserRole) == field)


def click_field(qtbot, panel, field: str) -> None:
    rect = panel.table.visualItemRect(field_item(panel, field))
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def shows_the_differences_of(panel, numpy_trace, onnx_trace, field: str) -> None:
    diff = difference_array(numpy_trace, onnx_trace, field)
    assert panel.diff_map.image.image.shape[:2] == diff.reshape(diff.shape[0], -1).shape
    assert f"of {field}:" in panel.diff_title.text() and f"({diff.max():.2e})" in panel.diff_title.text()


def test_the_clicked_fields_heatmap_is_made_on_the_worker(qtbot, monkeypatch, make_window):
    threads: list[threading.Thread] = []
    made = parity_panel.difference_map

    def recorded(*args):
        threads.append(threading.current_thread())
        return made(*args)

    monkeypatch.setattr(parity_panel, "difference_map", recorded)
    window = make_window("both")
    panel = show_dock(window, "parity")
    type_text(qtbot, window, "The cat sat on the mat.")
    panel = show_dock(window, "parity")
    qtbot.waitUntil(lambda: bool(panel.rows) and panel._drawn_diff is not None, timeout=WAIT_MS)
    field = "final_norm" if panel.field == "logits" else "logits"   # not the one already shown
    click_field(qtbot, panel, field)
    assert panel.diff_title.text().startswith(f"Computing the differences of {field}")
    qtbot.waitUntil(lambda: "rows are tokens" in panel.diff_title.text() and panel._drawn_diff[1] == field,
                    timeout=WAIT_MS)
    assert len(threads) >= 2 and all(t.name == "glassbox-model-worker" for t in threads)
    shows_the_differences_of(panel, *panel.traces_by_backend(), field)


def test_a_newer_click_supersedes_a_pending_heatmap(qtbot, show, analysed, bundle):
    worker = FakeWorker()
    panel = show(parity_panel.ParityPanel(), height=1200)
    panel.readout.use_worker(worker.submit)
    numpy_trace, onnx_trace = analysed("The cat sat."), analyse(OnnxRunner(bundle), "The cat sat.")
    panel.set_reference_trace(onnx_trace)
    panel.set_trace(numpy_trace)
    worker.run(0)                                   # the report; the worst field's heatmap is asked for
    assert len(worker.jobs) == 2 and panel.diff_title.text().startswith("Computing the differences of")
    first, second = [f for f in ("embed", "final_norm", "logits") if f != panel.field][:2]
    click_field(qtbot, panel, first)
    click_field(qtbot, panel, second)               # before the others were made
    assert len(worker.jobs) == 4 and all(job[2]() for job in worker.jobs[1:3]) and not worker.jobs[3][2]()
    worker.run(1)
    worker.run(2)                                   # stale: skipped
    assert panel.diff_title.text().startswith(f"Computing the differences of {second}")
    worker.run(3)
    shows_the_differences_of(panel, numpy_trace, onnx_trace, second)
    click_field(qtbot, panel, second)               # the same picture again: nothing new to make
    assert len(worker.jobs) == 4
