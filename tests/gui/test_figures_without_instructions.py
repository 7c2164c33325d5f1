"""An exported figure explains what it shows; how to use the panel ("Click a column…") stays on screen."""
from __future__ import annotations

import re

import pytest
from PySide6.QtWidgets import QLabel

from gui.panels.logit_lens_panel import CLICK_HINT, LogitLensPanel
from gui.panels.registry import panel_classes
from gui.panels.step_panel import StepPanel

INSTRUCTION = re.compile(r"\b(click|hover|drag|scroll)\b|\bpick (a|an|one|the)\b", re.IGNORECASE)  # not "can pick 10"


def figure_texts(figure) -> list[str]:
    return [label.text() for label in figure.widget.findChildren(QLabel)] + \
        ([figure.widget.text()] if isinstance(figure.widget, QLabel) else [])


@pytest.mark.parametrize("panel_class, name", [(LogitLensPanel, "logit_lens_heatmap"),
                                               (StepPanel, "step_dot_product")])
def test_the_figure_holds_no_instructions(show, analysed, panel_class, name):
    panel = show(panel_class(), 1000, 800)
    panel.set_trace(analysed("The cat sat on the mat."))
    figure = next(f for f in panel.figures() if f.name == name)
    texts = figure_texts(figure)
    assert texts and not [text for text in texts if INSTRUCTION.search(text)]


@pytest.mark.parametrize("panel_class", panel_classes(), ids=lambda c: c.__name__)
def test_no_figure_of_any_panel_holds_instructions(show, analysed, panel_class):
    panel = show(panel_class(), 1000, 800)
    panel.set_trace(analysed("The cat sat on the mat."))
    panel.flush()
    told = {f.name: [t for t in figure_texts(f) if INSTRUCTION.search(t)] for f in panel.figures()}
    assert not {name: texts for name, texts in told.items() if texts}


def test_the_lens_still_says_on_screen_how_to_select_a_position(show, analysed):
    panel = show(LogitLensPanel(), 1000, 800)
    panel.set_trace(analysed("The cat sat on the mat."))
    hints = [label for label in panel.findChildren(QLabel) if label.text() == CLICK_HINT]
    assert hints and hints[0].isVisibleTo(panel)
