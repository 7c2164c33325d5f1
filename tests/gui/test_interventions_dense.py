"""On a dense model (no experts) the Interventions panel says so instead of listing layers with nothing to switch."""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent
from PySide6.QtWidgets import QCheckBox, QLabel

from core.runners import NumpyRunner
from core.session import analyse
from gui.panels.interventions_panel import EXPERTS_NOTE, NO_EXPERTS_NOTE, InterventionsPanel

TEXT = "The cat sat on the mat."


def label_texts(widget) -> list[str]:
    """The labels shown under `widget` once the boxes of the last model are gone and the new ones shown."""
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    QCoreApplication.processEvents()
    return [label.text() for label in widget.findChildren(QLabel) if label.isVisibleTo(widget)]


def test_a_dense_model_has_no_expert_boxes_and_says_why(show, make_bundle):
    dense = make_bundle(seed=2, architecture="LlamaForCausalLM", num_local_experts=0, num_experts_per_tok=0)
    panel = show(InterventionsPanel(), 700, 500)
    panel.set_trace(analyse(NumpyRunner(dense), TEXT))
    assert label_texts(panel.experts_box) == [NO_EXPERTS_NOTE] and "no experts" in NO_EXPERTS_NOTE
    assert panel.experts_box.findChildren(QCheckBox) == []
    assert "checked" not in panel.experts_box.title()
    assert EXPERTS_NOTE not in label_texts(panel)   # the note on switching experts off would explain nothing
    assert panel.head_boxes and panel.switches().experts_on.shape == (dense.config.num_hidden_layers, 0)


def test_a_moe_model_after_a_dense_one_gets_its_expert_boxes_back(show, make_bundle, bundle):
    dense = make_bundle(seed=2, architecture="LlamaForCausalLM", num_local_experts=0, num_experts_per_tok=0)
    panel = show(InterventionsPanel(), 700, 500)
    panel.set_trace(analyse(NumpyRunner(dense), TEXT))
    panel.set_trace(analyse(NumpyRunner(bundle), TEXT))
    cfg = bundle.config
    assert len(panel.experts_box.findChildren(QCheckBox)) == cfg.num_hidden_layers * cfg.num_local_experts
    assert NO_EXPERTS_NOTE not in label_texts(panel.experts_box) and EXPERTS_NOTE in label_texts(panel)


def test_the_switches_figure_is_a_matrix_of_what_is_on_and_off(show, bundle):
    from gui.panels.interventions_panel import SWITCH_OFF, SWITCH_ON

    panel = show(InterventionsPanel(), 700, 500)
    panel.set_trace(analyse(NumpyRunner(bundle), TEXT))
    panel.head_boxes[1, 2].setChecked(False)
    panel.expert_boxes[0, 1].setChecked(False)
    figure = next(f for f in panel.figures() if f.name == "interventions_switches")
    cells = panel._switch_plot.image.image   # [layers, heads + experts, 4]
    heads = bundle.config.num_attention_heads
    off = {(r, c) for r in range(cells.shape[0]) for c in range(cells.shape[1]) if tuple(cells[r, c]) == SWITCH_OFF}
    assert off == {(1, 2), (0, heads + 1)}
    assert all(tuple(cells[r, c]) == SWITCH_ON for r in range(cells.shape[0]) for c in range(cells.shape[1])
               if (r, c) not in off)
    assert not figure.widget.findChildren(QCheckBox)


def test_heads_and_experts_are_named_as_the_head_grid_names_them(show, analysed):
    """'H2' in the Attention grid and here, not '0.2' (which read the same for a head and an expert)."""
    from gui.panels.attention_panel import AttentionPanel
    from gui.panels.interventions_panel import InterventionsPanel as Panel

    trace = analysed(TEXT)
    panel, attention = show(Panel(), 700, 500), show(AttentionPanel(), 900, 600)
    panel.set_trace(trace)
    attention.set_trace(trace)
    grid_names = [name.toPlainText() for name in attention.grid.head_names]
    assert [panel.head_boxes[1, h].text() for h in range(trace.num_heads)] == grid_names == \
        [f"H{h}" for h in range(trace.num_heads)]
    assert {box.text() for (_, e), box in panel.expert_boxes.items() if e == 1} == {"E1"}
