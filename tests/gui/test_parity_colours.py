"""Parity table colours: the share of the tolerance used, as the legend says (8 % is nearly white, not amber)."""
from __future__ import annotations

import pytest
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel

from gui.panels.parity_panel import OUTSIDE, WITHIN, ParityPanel, ratio_colour


def distance_from_white(colour: QColor) -> int:
    return sum(255 - c for c in colour.getRgb()[:3])


def test_no_difference_is_white_all_of_the_tolerance_is_amber_past_it_is_red():
    assert ratio_colour(0.0) == QColor("white")
    assert ratio_colour(1.0) == WITHIN
    assert ratio_colour(1.001) == OUTSIDE


@pytest.mark.parametrize("ratio", [0.01, 0.084, 0.25, 0.5, 0.9])
def test_the_shade_is_the_fraction_of_the_tolerance(ratio):
    """Linear: a field using 8.4 % of its tolerance (the shipped model's logits) is 8.4 % of the way to amber."""
    assert distance_from_white(ratio_colour(ratio)) / distance_from_white(WITHIN) == pytest.approx(ratio, abs=0.01)


def test_the_exported_table_has_a_legend_and_no_instructions(show):
    panel = show(ParityPanel(), 800, 700)
    texts = [label.text() for label in panel.fields_box.findChildren(QLabel)]
    assert any("how much of its tolerance" in text for text in texts)
    assert not any("click" in text.lower() for text in texts)
    assert "Click" in panel.click_hint.text() and not panel.fields_box.isAncestorOf(panel.click_hint)
