"""The Patching and Occlusion panels as a user reads them: the panel's own field names in messages, short stage
labels and legible sweeps in a small dock, occlusion colours behind the sentence's own text."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint

from core.occlusion import occlude
from core.session import analyse
from gui import plotting
from gui.panels.occlusion_panel import OcclusionPanel
from gui.panels.patching_panel import MIN_VIEW_SIZE, PatchingPanel
from gui.token_strip import token_fills
from tests.gui.qt_helpers import run_jobs_here

A, B = "订单成功了。订单", "订单取消了。订单"


@pytest.fixture(scope="module")
def runner(shipped_onnx):
    return shipped_onnx


@pytest.fixture(scope="module")
def clean(runner):
    return analyse(runner, A)


@pytest.fixture()
def patching(show, runner, clean):
    panel = show(PatchingPanel(), 576, 470)   # the right dock of a 1280 x 800 window
    run_jobs_here(panel, runner)
    panel.set_trace(clean)
    return panel


def test_patching_messages_name_the_panels_fields_not_the_cli_flags(patching):
    patching.corrupt_edit.setText(B)
    patching.answer_edit.setText("#5")
    patching.wrong_edit.setText("#5")
    patching.run_button.click()
    message = patching.summary.text()
    assert "answer or wrong field" in message and "--" not in message

    patching.answer_edit.setText("")
    patching.wrong_edit.setText("")
    patching.corrupt_edit.setText("订单")
    patching.run_button.click()
    message = patching.summary.text()
    assert "sentence B" in message and "same count" in message and "--" not in message


def test_the_sweeps_appear_with_the_first_result_not_as_empty_axes(patching):
    assert not patching.sweeps.isVisible()
    patching.corrupt_edit.setText("订单")   # a refused pair: still nothing to show
    patching.run_button.click()
    assert not patching.sweeps.isVisible()
    patching.corrupt_edit.setText(B)
    patching.run_button.click()
    assert patching.result is not None and patching.sweeps.isVisible()


def test_the_sweeps_are_legible_in_a_small_dock(patching, qtbot):
    patching.corrupt_edit.setText(B)
    patching.run_button.click()
    assert patching.result is not None
    qtbot.wait(50)
    resid = patching.plots["resid"]
    L = patching.result.heads.shape[0]
    stages = ["emb"] + [name for l in range(L) for name in (f"L{l}.attn", f"L{l}")]
    assert resid.getAxis("left").labels() == stages
    assert patching.sweeps.columns == 1   # one sweep to a row: each keeps its legible size, the panel scrolls
    for view in patching.views.values():
        assert view.width() >= MIN_VIEW_SIZE[0] and view.height() >= MIN_VIEW_SIZE[1]
    axis = resid.getAxis("left")
    rows_px = resid.vb.height() / len(stages)
    assert axis.label_step(rows_px) == 1   # every stage named, none overlapping the next

    patching.resize(1280, 800)
    qtbot.wait(50)
    assert patching.sweeps.columns == 2


def test_bs_tokens_stay_level_and_apart_in_a_narrow_dock(show, runner, clean, qtbot):
    """Turned, a Chinese label reads sideways: the position axes keep B's tokens level, every n-th that fits."""
    panel = show(PatchingPanel(), 380, 700)
    run_jobs_here(panel, runner)
    panel.set_trace(clean)
    panel.corrupt_edit.setText(B)
    panel.run_button.click()
    qtbot.wait(50)
    panel.grab()   # painted: the axes are laid out for their width
    for kind in ("resid", "heads_pos"):
        axis = panel.plots[kind].getAxis("bottom")
        drawing = axis.drawing()
        shown = [(x, text) for x, text in drawing.labelled if text]
        assert len(shown) >= 2 and len(drawing.texts) == len(shown), "labels turned, not level"
        assert len(shown) < clean.n_tokens   # thinned: every label would overlap its neighbour here
        width = axis.label_texts().width
        gaps = [b - a for (a, _), (b, _) in zip(shown, shown[1:])]
        assert min(gaps) >= max(width(text) for _, text in shown), (kind, shown)
        assert {text for _, text in shown} <= set(axis.labels())


def test_occlusion_colours_sit_behind_each_tokens_own_text(show, runner, clean, qtbot):
    panel = show(OcclusionPanel(), 1000, 600)
    panel.set_trace(clean)
    result = occlude(runner, clean.input_ids, labels=clean.labels())
    panel.show_result(result)
    qtbot.wait(50)
    strip = panel.delta_strip
    labels = clean.labels()
    assert strip.chip_count() == clean.n_tokens
    assert [strip.chip_lines(t)[0] for t in range(clean.n_tokens)] == labels   # the sentence's own text
    span = float(np.nanmax(np.abs(result.delta_logprob)))
    fills = token_fills(result.delta_logprob, (-span, span), plotting.colormap(plotting.DIVERGING))
    image = strip.grab().toImage()
    biggest = int(np.nanargmax(np.abs(result.delta_logprob)))
    rect = strip.chip_rect(biggest)
    inside = QPoint(int(rect.left() + 3), int(rect.center().y()))   # inside the chip, beside its text
    shown = image.pixelColor(inside)
    expected = fills[biggest]
    assert max(abs(shown.red() - expected.red()), abs(shown.green() - expected.green()),
               abs(shown.blue() - expected.blue())) <= 3
    text_pixels = [image.pixelColor(x, int(rect.top() + 10)) for x in range(int(rect.left() + 4), int(rect.right() - 4))]
    assert any(abs(p.lightness() - expected.lightness()) > 60 for p in text_pixels)   # its text drawn over it
    assert [panel.rollout_strip.chip_lines(t)[0] for t in range(clean.n_tokens)] == labels
    assert panel.delta_bar.levels() == pytest.approx((-span, span))


@pytest.mark.parametrize("width", [466, 700], ids=["1152px-screen", "1600px-screen"])   # the Occlusion dock's widths
def test_occlusion_table_shows_every_column_beside_or_under_the_strips(show, runner, clean, qtbot, width):
    from PySide6.QtCore import Qt

    panel = show(OcclusionPanel(), width, 346)
    panel.set_trace(clean)
    panel.show_result(occlude(runner, clean.input_ids, labels=clean.labels()))
    qtbot.wait(50)
    table = panel.table
    assert table.horizontalHeader().length() <= table.viewport().width(), "columns cut off at the table's edge"
    if panel.splitter.orientation() == Qt.Orientation.Vertical:   # under the strips: its rows in view, not a sliver
        assert table.height() >= table.horizontalHeader().height() + 3 * table.rowHeight(0)
    else:
        assert width >= 700


def test_a_value_that_rounds_to_zero_reads_as_zero_without_a_sign(show):
    from gui.token_strip import TokenStrip

    strip = show(TokenStrip())
    strip.set_values(["a", "b", "c"], np.array([-0.001, 0.004, -0.3]), (-1.0, 1.0), plotting.colormap(plotting.DIVERGING))
    assert [strip.chip_lines(i)[1] for i in range(3)] == ["+0.00", "+0.00", "-0.30"]
    strip.set_values(["a"], np.array([-0.001]), (0.0, 1.0), plotting.colormap(), "{:.2f}")
    assert strip.chip_lines(0)[1] == "0.00"


def test_occlusion_placeholders_show_whole_in_a_narrow_dock(show, runner, clean, qtbot):
    panel = show(OcclusionPanel(), 466, 346)   # the dock of a 1152 px screen
    panel.set_trace(clean)
    panel.show_result(occlude(runner, clean.input_ids, labels=clean.labels()))   # its strips widen the page
    qtbot.wait(30)
    for edit in (panel.baseline_edit, panel.target_edit):
        shown = edit.contentsRect().width() - 2 * edit.style().pixelMetric(edit.style().PixelMetric.PM_DefaultFrameWidth)
        assert edit.fontMetrics().horizontalAdvance(edit.placeholderText()) <= shown - 4, edit.placeholderText()
        assert edit.toolTip()   # the whole description, where the placeholder is short
    assert panel.page_area.horizontalScrollBar().maximum() == 0   # and the row needs no sideways scrolling
