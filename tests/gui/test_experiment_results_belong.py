"""A sweep's or an occlusion's result is shown, clickable and exported only beside the sentences it was run for: a
new sentence A, an edited B or a failed run hides it, and a clicked cell never loses the sentence the user typed."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from core.interventions import Interventions
from core.occlusion import occlude
from core.patching import cell_interventions
from core.session import analyse
from gui.panels.occlusion_panel import OcclusionPanel
from gui.panels.patching_panel import PatchingPanel
from tests.gui.qt_helpers import front, run_jobs_here, settled

A, B = "订单成功了。订单", "订单取消了。订单"
ENGLISH = "The cat sat on the mat."


@pytest.fixture(scope="module")
def runner(shipped_onnx):
    return shipped_onnx


@pytest.fixture(scope="module")
def clean(runner):
    return analyse(runner, A)


@pytest.fixture()
def swept(show, runner, clean):
    """A Patching panel that has run its sweeps for A (the trace) and B; the cells it asked to show, in `clicks`."""
    panel = show(PatchingPanel(), 900, 700)
    run_jobs_here(panel, runner)
    panel.set_trace(clean)
    panel.corrupt_edit.setText(B)
    panel.run_button.click()
    assert panel.result is not None and panel.sweeps.isVisibleTo(panel)
    panel.clicks = []
    panel.sigShowPatched.connect(lambda text, interventions: panel.clicks.append(text))
    return panel


def assert_sweeps_hidden(panel):
    assert not panel.sweeps.isVisibleTo(panel)
    assert "metric =" not in panel.summary.text()   # no numbers of the hidden run, unlabelled
    assert panel.figures() == []
    panel.plots["resid"].sigCellClicked.emit(0, 0)
    assert panel.clicks == []   # a hidden cell puts no sentence in the bar


def test_a_new_sentence_a_hides_the_sweeps_and_the_sentence_they_were_run_for_shows_them(swept, runner, clean):
    cell = cell_interventions(swept.result.pair, "resid", (0, 3))
    swept.set_trace(analyse(runner, B, interventions=cell))   # what a clicked cell shows: still these sweeps
    assert swept.sweeps.isVisibleTo(swept) and len(swept.figures()) == 4

    swept.set_trace(analyse(runner, ENGLISH))
    assert_sweeps_hidden(swept)
    assert swept.summary.text().startswith("Sentence A (the sentence bar) changed")
    assert "Sentence A" in swept.why_no_figures()

    swept.set_trace(clean)   # the user's A again (Ctrl+Z in the bar): its sweeps are back
    assert swept.sweeps.isVisibleTo(swept) and "metric =" in swept.summary.text()
    swept.plots["resid"].sigCellClicked.emit(0, 3)
    assert swept.clicks == [B]


def test_a_head_switched_off_after_the_sweeps_hides_them_until_it_is_on_again(swept, runner, clean):
    heads_off = np.ones((clean.num_layers, clean.num_heads), np.float32)
    heads_off[0, 1] = 0
    swept.set_trace(analyse(runner, A, interventions=Interventions(head_mask=heads_off)))
    assert_sweeps_hidden(swept)
    assert swept.summary.text().startswith("The heads and experts switched off changed")
    swept.set_trace(clean)
    assert swept.sweeps.isVisibleTo(swept) and len(swept.figures()) == 4


def test_an_edited_b_hides_the_sweeps_until_it_is_the_b_they_were_run_for(swept):
    swept.corrupt_edit.setText("订单取消了。好的")
    assert_sweeps_hidden(swept)
    assert swept.summary.text().startswith("Sentence B changed")
    swept.corrupt_edit.setText(B)
    assert swept.sweeps.isVisibleTo(swept) and len(swept.figures()) == 4


def test_a_failed_run_hides_the_sweeps_of_the_run_before(swept):
    swept.corrupt_edit.setText(A)   # B = A: both texts give the same logit difference
    swept.run_button.click()
    assert swept.result is None
    assert swept.summary.text().startswith("patching: ") and "same" in swept.summary.text()
    assert_sweeps_hidden(swept)
    assert swept.why_no_figures().startswith("The patching sweeps failed: ")


def test_an_invalid_occlusion_target_hides_the_last_targets_chips_and_table(show, runner, clean):
    panel = show(OcclusionPanel(), 1000, 600)
    run_jobs_here(panel, runner)
    panel.set_trace(clean)
    assert panel.result is not None
    parts = (panel.delta_strip, panel.rollout_strip, panel.delta_bar, panel.table)
    assert all(part.isVisibleTo(panel) for part in parts) and panel.table.rowCount() == clean.n_tokens

    panel.target_edit.setText("zzqq xx")
    panel.target_edit.editingFinished.emit()
    assert panel.summary.text().startswith("occlusion: ")
    assert not any(part.isVisibleTo(panel) for part in parts)
    assert panel.summary.isVisibleTo(panel)   # the message says why
    assert panel.figures() == [] and "failed" in panel.why_no_figures()

    panel.target_edit.setText("")
    panel.target_edit.editingFinished.emit()
    assert panel.result is not None and all(part.isVisibleTo(panel) for part in parts)
    assert panel.result.delta_logprob.tolist() == pytest.approx(
        occlude(runner, clean.input_ids).delta_logprob.tolist(), abs=1e-4, nan_ok=True)


def test_run_sweeps_while_a_patched_b_is_shown_runs_them_for_the_a_they_were_run_for(swept, runner):
    first = swept.result
    cell = cell_interventions(first.pair, "heads", (1, 2))
    swept.set_trace(analyse(runner, B, interventions=cell))   # a clicked cell: the sentence bar holds B
    swept.answer_edit.setText(f"#{first.pair.wrong_id}")   # the user asks another question of the same pair
    swept.wrong_edit.setText(f"#{first.pair.answer_id}")
    swept.run_button.click()
    assert swept.error == "" and swept.result is not None
    assert swept.result.pair.clean.input_ids.tolist() == first.pair.clean.input_ids.tolist()   # A, not B again
    assert swept.result.pair.answer_id == first.pair.wrong_id and swept.sweeps.isVisibleTo(swept)


def test_cancelling_a_new_run_brings_back_the_sweeps_of_the_run_before(swept):
    first = swept.result
    swept.sigRunExperiment.disconnect()   # the new run stays under way until cancelled
    cancelled = []
    swept.sigRunExperiment.connect(cancelled.append)
    swept.run_button.click()
    assert not swept.sweeps.isVisibleTo(swept) and swept.summary.text() == "running the sweeps…"
    swept.cancel_button.click()
    job = cancelled[0]
    with pytest.raises(Exception, match="cancelled"):
        job.progress(1, 2)   # the sweep's next checkpoint ends it
    job.on_error("cancelled")
    assert swept.result is first and swept.sweeps.isVisibleTo(swept) and "metric =" in swept.summary.text()
    assert len(swept.figures()) == 4


# ---------------------------------------------------------------- in the window: the sentence bar

def test_a_clicked_cell_keeps_the_typed_sentence_a_ctrl_z_away_and_a_hidden_cell_changes_nothing(qtbot, shipped_window):
    window = shipped_window(A, 1500, 950)
    panel, bar = front(qtbot, window, "patching"), window.sentence_bar
    bar.setText(A)   # as typed
    qtbot.waitUntil(lambda: settled(window, A), timeout=20000)
    panel.corrupt_edit.setText(B)
    panel.run_button.click()
    qtbot.waitUntil(lambda: panel.result is not None, timeout=60000)

    panel.plots["resid"].sigCellClicked.emit(0, 3)
    qtbot.waitUntil(lambda: window.controller.trace.interventions.patches("resid_patch"), timeout=20000)
    window.flush_redraws()
    assert bar.text() == B and panel.sweeps.isVisibleTo(panel)   # B patched is these sweeps' own run
    bar.setFocus()
    QTest.keyClick(bar, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert bar.text() == A
    qtbot.waitUntil(lambda: settled(window, A), timeout=20000)
    assert not window.controller.trace.interventions.describe()   # A itself, the patch dropped with B
    assert panel.sweeps.isVisibleTo(panel)

    bar.setText(ENGLISH)   # typed over A: the sweeps are another sentence's
    qtbot.waitUntil(lambda: settled(window, ENGLISH), timeout=20000)
    assert not panel.sweeps.isVisibleTo(panel)
    panel.plots["resid"].sigCellClicked.emit(0, 3)
    qtbot.wait(50)
    assert bar.text() == ENGLISH and window.controller.text == ENGLISH
