"""Switching heads off in the attention grid: the same Interventions value as the Interventions panel, both ways,
and the run shown then has that head ablated."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from core.interventions import Interventions, head_mask_off
from core.runners import NumpyRunner
from core.session import analyse
from tests.gui.qt_helpers import front, type_text

SENTENCE = "The cat sat on the mat because it was tired."


@pytest.fixture()
def window(make_window, qtbot):
    window = make_window("numpy")
    type_text(qtbot, window, SENTENCE)
    for name in ("attention", "interventions"):
        window.docks[name].show()
    return window


def head_mask_shown(window) -> np.ndarray:
    return window.controller.trace.interventions.head_mask


def switched_off(window, layer: int, head: int) -> bool:
    trace = window.controller.trace
    return trace.interventions is not None and trace.interventions.head_mask[layer, head] == 0


def test_the_corner_box_switches_a_head_off_in_the_run_and_in_the_interventions_panel(qtbot, window, bundle):
    attention = front(qtbot, window, "attention")
    grid = attention.grid
    assert grid.switches[0][1].on and not grid.switched_off[0][1].isVisible()
    selected = window.controller.selection
    qtbot.mouseClick(grid.viewport(), Qt.MouseButton.LeftButton, pos=grid.switch_point(0, 1))
    qtbot.waitUntil(lambda: switched_off(window, 0, 1), timeout=20000)
    expected = np.ones_like(head_mask_shown(window))
    expected[0, 1] = 0
    np.testing.assert_array_equal(head_mask_shown(window), expected)   # that head, no other
    assert window.controller.selection == selected   # the box took the click, not the thumbnail under it

    # the run shown is the ablated run, exactly as core makes it
    reference = analyse(NumpyRunner(bundle), SENTENCE,
                        interventions=Interventions(head_mask=head_mask_off(bundle.config, [(0, 1)])))
    np.testing.assert_allclose(window.controller.trace.layers[0].attn_out, reference.layers[0].attn_out, atol=1e-6)
    full = analyse(NumpyRunner(bundle), SENTENCE)
    assert np.abs(window.controller.trace.layers[0].attn_out - full.layers[0].attn_out).max() > 1e-4

    # the thumbnail is marked and the Interventions panel shows the same switch
    qtbot.waitUntil(lambda: attention.trace is window.controller.trace, timeout=10000)
    assert not grid.switches[0][1].on and grid.switched_off[0][1].isVisible()
    switches = front(qtbot, window, "interventions")
    assert not switches.head_boxes[0, 1].isChecked() and switches.head_boxes[0, 0].isChecked()
    assert "heads 0.1 ablated (zero)" in switches.intervention_banner.text()

    # a right-click on the thumbnail switches it back on
    attention = front(qtbot, window, "attention")
    qtbot.mouseClick(grid.viewport(), Qt.MouseButton.RightButton, pos=grid.head_point(0, 1))
    qtbot.waitUntil(lambda: not switched_off(window, 0, 1), timeout=20000)
    switches = front(qtbot, window, "interventions")
    assert switches.head_boxes[0, 1].isChecked()


def test_a_plain_click_on_a_thumbnail_still_only_selects_it(qtbot, window):
    attention = front(qtbot, window, "attention")
    grid = attention.grid
    qtbot.mouseClick(grid.viewport(), Qt.MouseButton.LeftButton, pos=grid.head_point(1, 2))
    qtbot.waitUntil(lambda: (window.controller.selection.layer, window.controller.selection.head) == (1, 2),
                    timeout=5000)
    assert not window.controller.interventions.describe()


def test_ctrl_click_and_the_layer_name_switch_heads_off(qtbot, window, bundle):
    attention = front(qtbot, window, "attention")
    grid = attention.grid
    qtbot.mouseClick(grid.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier,
                     pos=grid.head_point(1, 0))
    qtbot.waitUntil(lambda: switched_off(window, 1, 0), timeout=20000)
    qtbot.waitUntil(lambda: attention.trace is window.controller.trace, timeout=10000)
    qtbot.mouseClick(grid.viewport(), Qt.MouseButton.LeftButton, pos=grid.layer_point(1))
    qtbot.waitUntil(lambda: head_mask_shown(window)[1].sum() == 0, timeout=20000)
    assert head_mask_shown(window)[0].sum() == bundle.config.num_attention_heads   # layer 0 untouched
    qtbot.waitUntil(lambda: attention.trace is window.controller.trace, timeout=10000)
    assert all(grid.switched_off[1][h].isVisible() for h in range(bundle.config.num_attention_heads))
    assert "off" in grid.layer_names[1].toPlainText()
    switches = front(qtbot, window, "interventions")
    assert not switches.layer_boxes[1].isChecked() and switches.layer_boxes[0].isChecked()

    attention = front(qtbot, window, "attention")   # all off: the layer's name switches them back on
    qtbot.mouseClick(grid.viewport(), Qt.MouseButton.LeftButton, pos=grid.layer_point(1))
    qtbot.waitUntil(lambda: head_mask_shown(window).min() == 1, timeout=20000)


def test_the_interventions_panel_switch_shows_in_the_grid(qtbot, window):
    window.controller.select({"layer": 1, "head": 3})
    switches = front(qtbot, window, "interventions")
    switches.head_boxes[1, 3].setChecked(False)
    qtbot.waitUntil(lambda: switched_off(window, 1, 3), timeout=20000)
    attention = front(qtbot, window, "attention")
    qtbot.waitUntil(lambda: not attention.grid.switches[1][3].on, timeout=10000)
    assert attention.grid.switched_off[1][3].isVisible()
    assert attention.shown == (1, 3) and "switched off" in attention.matrix.titleLabel.text


def test_the_ablate_mode_is_one_setting_shown_and_edited_in_both_panels(qtbot, window, bundle):
    switches = front(qtbot, window, "interventions")
    switches.head_boxes[0, 2].setChecked(False)
    qtbot.waitUntil(lambda: switched_off(window, 0, 2), timeout=20000)
    switches.mean_button.setChecked(True)
    qtbot.waitUntil(lambda: window.controller.trace.interventions.ablate_mode == "mean", timeout=20000)
    attention = front(qtbot, window, "attention")
    assert attention.ablate_combo.currentData() == "mean"

    attention.ablate_combo.setCurrentIndex(attention.ablate_combo.findData("zero"))   # edits the same value
    qtbot.waitUntil(lambda: window.controller.trace.interventions.ablate_mode == "zero", timeout=20000)
    assert switched_off(window, 0, 2)   # the head stays off
    switches = front(qtbot, window, "interventions")
    assert switches.zero_button.isChecked()
    reference = analyse(NumpyRunner(bundle), SENTENCE, interventions=Interventions(
        head_mask=head_mask_off(bundle.config, [(0, 2)]), ablate_mode="zero"))
    np.testing.assert_allclose(window.controller.trace.logits, reference.logits, atol=1e-5)


def test_two_quick_switches_both_hold(qtbot, window):
    attention = front(qtbot, window, "attention")
    attention.toggle_head(0, 0)
    attention.toggle_head(1, 1)   # before the first run is back
    qtbot.waitUntil(lambda: switched_off(window, 0, 0) and switched_off(window, 1, 1), timeout=20000)
    assert head_mask_shown(window).sum() == head_mask_shown(window).size - 2


def test_hovering_the_box_says_what_a_click_does(qtbot, window):
    from tests.gui.qt_helpers import hover

    attention = front(qtbot, window, "attention")
    grid = attention.grid
    hover(grid.viewport(), grid.switch_point(0, 2))
    qtbot.waitUntil(lambda: "click to switch it off" in grid.toolTip(), timeout=5000)
    hover(grid.viewport(), grid.head_point(0, 2))
    qtbot.waitUntil(lambda: "right-click or Ctrl+click" in grid.toolTip(), timeout=5000)
    hover(grid.viewport(), grid.layer_point(1))
    qtbot.waitUntil(lambda: "Layer 1: click to switch every head of it off" in grid.toolTip(), timeout=5000)
