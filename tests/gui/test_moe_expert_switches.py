"""Switching experts off in the MoE panel: the same Interventions as the Interventions panel, both in step."""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt

from tests.gui.qt_helpers import front

TEXT = "The cat sat on the mat and looked at the door."


def start(qtbot, make_window):
    window = make_window()
    window.controller.set_text(TEXT)
    window.controller.flush()
    qtbot.waitUntil(lambda: window.controller.trace is not None, timeout=20000)
    return window


def test_an_expert_switched_off_in_the_moe_panel_is_never_selected_and_shows_in_interventions(qtbot, make_window):
    window = start(qtbot, make_window)
    moe = front(qtbot, window, "moe")
    layer = 1
    qtbot.mouseClick(moe.layer_buttons.button(layer), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: moe.selection.layer == layer, timeout=5000)
    window.flush_redraws()   # the layer's switches are drawn, not just the selection stored
    lt = window.controller.trace.layers[layer]
    expert = int(np.bincount(lt.expert_ids.reshape(-1)).argmax())   # the busiest: switching it off changes routing
    assert "picks its top-k among the remaining experts, weights renormalised to sum to 1" in moe.load.rule.text()
    qtbot.mouseClick(moe.load.switches[expert], Qt.MouseButton.LeftButton)

    qtbot.waitUntil(lambda: window.controller.trace.interventions.switches_experts_off(), timeout=20000)
    run = window.controller.trace
    assert run.interventions.experts_off[layer, expert] and run.interventions.experts_off.sum() == 1
    assert expert not in run.layers[layer].expert_ids
    np.testing.assert_allclose(run.layers[layer].expert_weights.sum(axis=1), 1.0, rtol=1e-6)
    qtbot.waitUntil(lambda: moe.trace is run, timeout=10000)
    assert not moe.load.switches[expert].isChecked()
    assert f"experts {layer}.{expert} off" in moe.intervention_banner.text()

    switches = front(qtbot, window, "interventions")
    assert not switches.expert_boxes[layer, expert].isChecked()
    assert all(box.isChecked() for (l, e), box in switches.expert_boxes.items() if (l, e) != (layer, expert))


def test_switching_back_on_in_the_interventions_panel_shows_in_the_moe_panel(qtbot, make_window):
    window = start(qtbot, make_window)
    switches = front(qtbot, window, "interventions")
    switches.expert_boxes[0, 2].setChecked(False)
    qtbot.waitUntil(lambda: window.controller.trace.interventions.switches_experts_off(), timeout=20000)
    moe = front(qtbot, window, "moe")
    qtbot.waitUntil(lambda: not moe.load.switches[2].isChecked(), timeout=10000)
    assert moe.routing.off.tolist() == [e == 2 for e in range(len(moe.load.switches))]
    qtbot.mouseClick(moe.load.switches[2], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.controller.trace.interventions.switches_experts_off(), timeout=20000)
    switches = front(qtbot, window, "interventions")
    assert switches.expert_boxes[0, 2].isChecked()


def test_switching_off_too_many_is_refused_with_a_message(qtbot, make_window, bundle):
    window = start(qtbot, make_window)
    moe = front(qtbot, window, "moe")
    k, E = bundle.config.num_experts_per_tok, bundle.config.num_local_experts
    for e in range(E - k):
        qtbot.mouseClick(moe.load.switches[e], Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda e=e: moe.trace is window.controller.trace
                        and moe.trace.interventions.experts_off[0, e], timeout=20000)
    emitted = []
    moe.sigSetInterventions.connect(emitted.append)
    qtbot.mouseClick(moe.load.switches[E - k], Qt.MouseButton.LeftButton)
    assert emitted == []
    assert moe.load.switches[E - k].isChecked()         # back to what the run has
    message = moe.load.message.text()
    assert moe.load.message.isVisibleTo(moe) and f"at least {k}" in message and "layer 0" in message


def test_dense_models_keep_the_no_router_state(show, make_bundle):
    from core.runners import NumpyRunner
    from core.session import analyse
    from gui.panels.moe_panel import DENSE_TEXT, MoePanel

    bundle = make_bundle(seed=2, architecture="LlamaForCausalLM", num_local_experts=0, num_experts_per_tok=0)
    panel = show(MoePanel(), 900, 600)
    panel.set_trace(analyse(NumpyRunner(bundle), TEXT))
    assert panel.showing_empty_state() and panel.empty.text() == DENSE_TEXT
    assert panel.load.switches == []


def test_the_whatif_never_forces_a_switched_off_expert(show, bundle, qtbot):
    from core.runners import NumpyRunner
    from core.routing_view import switch_expert
    from core.session import analyse
    from gui.panels.moe_panel import MoePanel

    runner = NumpyRunner(bundle)
    plain = analyse(runner, TEXT)
    run = analyse(runner, TEXT, interventions=switch_expert(plain, 0, 1, on=False))
    panel = show(MoePanel(), 1200, 800)
    panel.set_trace(run)
    assert panel.whatif.expert_box.currentIndex() != 1                 # the default is an expert still on
    assert "switched off" in panel.whatif.expert_box.itemText(1)
    panel.whatif.expert_box.setCurrentIndex(1)
    with qtbot.assertNotEmitted(panel.sigRequestVariant):
        panel.request_whatif()
    assert "switched off" in panel.whatif.status.text() and panel.pending is None
