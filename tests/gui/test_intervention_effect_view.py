"""The before/after bars of one prediction: each row names its token, elided as on every token axis, then the change."""
from __future__ import annotations

import numpy as np

from core.experiment_runs import next_token_change
from gui.intervention_effect_view import InterventionEffectView
from gui.text_fit import LABEL_COLUMNS, columns


def test_each_row_names_its_token_elided_and_its_change_whole(qtbot):
    view = InterventionEffectView()
    qtbot.addWidget(view)
    change = next_token_change(np.array([3.0, 1.0, 0.0, -2.0]), np.array([0.0, 2.5, 0.0, 1.0]), k=2)
    pieces = ["订单取消了订单取消了", "cat", "dog"]   # the first is wider than a token label gets
    view.show_change(change, pieces)
    first = view.labels[0]
    token, _, delta = first.partition("  Δlog p ")
    assert columns(token) <= LABEL_COLUMNS and token.endswith("…") and pieces[0].startswith(token[:-1])
    assert float(delta) == round(float(change.delta_logprob[0]), 2)
    assert view.labels[1].startswith("cat  Δlog p ") and view.getPlotItem().getAxis("left").labels() == view.labels
