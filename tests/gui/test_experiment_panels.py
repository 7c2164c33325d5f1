"""The experiment panels in the window on the shipped model: a sweep runs on the worker, a clicked cell is shown
everywhere, Cancel ends a sweep, a switched-off head changes the Next-token bars and every banner."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtWidgets import QLabel

from core.occlusion import occlude
from core.patching import logit_difference
from core.runners import OnnxRunner
from tests.gui.qt_helpers import front

A, B = "订单成功了。订单", "订单取消了。订单"


@pytest.fixture()
def window(shipped_window):
    return shipped_window(A, 1500, 950)


def test_a_sweep_runs_and_a_clicked_cell_shows_the_patched_run_everywhere(qtbot, window, shipped):
    panel = front(qtbot, window, "patching")
    panel.corrupt_edit.setText(B)
    assert not panel.progress.isVisibleTo(panel)   # idle, an empty bar reads as an unlabelled text box
    panel.run_button.click()
    assert panel.cancel_button.isEnabled() and not panel.run_button.isEnabled()
    assert panel.progress.isVisibleTo(panel)
    qtbot.waitUntil(lambda: panel.result is not None, timeout=60000)
    assert not panel.progress.isVisibleTo(panel)
    result = panel.result
    L = shipped.config.num_hidden_layers
    np.testing.assert_allclose(result.resid[0, 3], 1.0, atol=0.05)   # 成/取 at the embedding restores most of A
    assert panel.progress.value() == panel.progress.maximum() > 0
    assert {f.name for f in panel.figures()} == {"patching_resid", "patching_heads", "patching_heads_pos",
                                                 "patching_experts"}
    assert "1.0" in panel.result.sweep_csv("heads_pos")

    stage, position = 2 * L - 1, result.resid.shape[1] - 1   # after the last layer's attention, last position
    clicked = panel.plots["resid"]
    clicked.sigCellClicked.emit(stage, position)
    qtbot.waitUntil(lambda: window.controller.trace.interventions.patches("resid_patch"), timeout=20000)
    shown = window.controller.trace
    assert shown.text == B
    metric = logit_difference(shown.logits, result.pair.answer_id, result.pair.wrong_id)
    np.testing.assert_allclose(result.pair.normalised(metric), result.resid[stage, position], atol=1e-4)
    attention = front(qtbot, window, "attention")
    assert attention.intervention_banner.isVisibleTo(attention)
    assert "resid patched at 1 site(s)" in attention.intervention_banner.text()
    assert "resid patched" in window.interventions_label.text()

    window.controller.set_text(A)   # a patch belongs to its sentence: typing another one drops it
    window.controller.flush()
    qtbot.waitUntil(lambda: window.controller.trace.text == A, timeout=20000)
    assert not window.controller.trace.interventions.describe()
    window.flush_redraws()   # the panels draw the new run at their next frame: draw it now
    assert not attention.intervention_banner.isVisibleTo(attention)


def test_cancel_ends_a_sweep_without_a_result(qtbot, window):
    panel = front(qtbot, window, "patching")
    panel.corrupt_edit.setText(B)
    panel.run_button.click()
    panel.cancel_button.click()
    qtbot.waitUntil(lambda: panel.job is None, timeout=60000)
    assert panel.result is None
    assert "cancelled" in panel.summary.text()
    assert panel.run_button.isEnabled() and not panel.cancel_button.isEnabled()


def test_a_mismatched_b_gets_one_message(qtbot, window):
    panel = front(qtbot, window, "patching")
    panel.corrupt_edit.setText("订单")
    panel.run_button.click()
    qtbot.waitUntil(lambda: panel.job is None, timeout=20000)
    assert "same count" in panel.summary.text() and panel.result is None


def test_switching_heads_off_changes_the_next_token_bars_and_the_banner(qtbot, window):
    switches = front(qtbot, window, "interventions")
    switches.layer_boxes[1].setChecked(False)   # every head of layer 1
    qtbot.waitUntil(lambda: window.controller.trace.interventions.head_mask[1].sum() == 0, timeout=20000)
    next_token = front(qtbot, window, "next_token")
    qtbot.waitUntil(lambda: next_token.effect.change is not None, timeout=20000)
    change = next_token.effect.change
    trace = window.controller.trace
    full = OnnxRunner(window.controller.bundle).run(trace.input_ids)
    np.testing.assert_allclose(change.p_full[0], np.exp(full.logits[-1] - full.logits[-1].max()).max() /
                               np.exp(full.logits[-1] - full.logits[-1].max()).sum(), rtol=1e-4)
    assert change.p_intervened[0] < 0.01 < change.p_full[0]   # 成 after 订单成功了。订单 needs layer 1's heads
    assert "heads 1.0, 1.1, 1.2, 1.3 ablated (zero)" in next_token.intervention_banner.text()
    assert "heads 1.0" in window.interventions_label.text()
    assert "next_token_change" in [f.name for f in next_token.figures()]

    switches = front(qtbot, window, "interventions")
    switches.clear_button.click()
    qtbot.waitUntil(lambda: not window.controller.trace.interventions.describe(), timeout=20000)
    window.flush_redraws()   # the panels draw the new trace at the next frame, which a loaded machine may not have reached
    assert not switches.intervention_banner.isVisibleTo(switches)


def test_too_many_experts_off_is_refused_with_a_message(qtbot, window, shipped):
    switches = front(qtbot, window, "interventions")
    k, E = shipped.config.num_experts_per_tok, shipped.config.num_local_experts
    for e in range(E - k + 1):
        switches.expert_boxes[0, e].setChecked(False)
    assert "not applied" in switches.message.text() and "at least" in switches.message.text()


def test_occlusion_shows_the_core_result_for_the_selected_prediction(qtbot, window, shipped):
    panel = front(qtbot, window, "occlusion")
    qtbot.waitUntil(lambda: panel.result is not None, timeout=20000)
    expected = occlude(OnnxRunner(shipped), window.controller.trace.input_ids)
    np.testing.assert_allclose(panel.result.delta_logprob, expected.delta_logprob, atol=1e-4)
    np.testing.assert_allclose(panel.result.rollout, expected.rollout, atol=1e-6)
    assert panel.table.rowCount() == window.controller.trace.n_tokens
    assert any("approximation" in label.text() for label in panel.findChildren(QLabel))
    assert [f.name for f in panel.figures()] == ["occlusion_strip"]
    assert panel.figures()[0].table().splitlines()[0] == "position,token,delta_logprob,rollout"

    panel.mode.setCurrentIndex(1)
    panel.baseline_edit.setText("。")
    panel.baseline_edit.editingFinished.emit()
    qtbot.waitUntil(lambda: panel.result is not None and panel.result.baseline_id != -1, timeout=20000)
    assert panel.result.baseline_id == shipped.tokenizer.encode("。")[0]
