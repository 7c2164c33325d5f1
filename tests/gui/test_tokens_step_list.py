"""The Tokens panel's merge-step list: a model-backed view that follows the slider and drives it."""
from __future__ import annotations

from PySide6.QtCore import Qt

from core.runners import NumpyRunner
from core.session import analyse
from core.tokens_view import MergeReplay
from gui.panels.tokens_panel import TokensPanel


def test_the_step_list_holds_every_replay_step_and_follows_the_slider(show, bundle):
    panel = show(TokensPanel(), 900, 600)
    trace = analyse(NumpyRunner(bundle), "the cat sat on the mat")
    panel.set_trace(trace)
    entries = MergeReplay(trace.tokenization).entries()
    model = panel.step_list.model()
    assert [model.index(row).data(Qt.ItemDataRole.DisplayRole) for row in range(model.rowCount())] == entries
    assert panel.step_list.currentIndex().row() == len(entries) - 1   # a new sentence shows its last step
    panel.slider.setValue(2)
    assert panel.step_list.currentIndex().row() == 2


def test_choosing_a_row_in_the_step_list_moves_the_replay_there(show, bundle):
    panel = show(TokensPanel(), 900, 600)
    panel.set_trace(analyse(NumpyRunner(bundle), "订单成交，订单取消"))
    panel.step_list.setCurrentIndex(panel.step_list.model().index(1))
    assert panel.slider.value() == 1
    assert panel.replay.step(1).caption == panel.step_label.text()


def test_a_shorter_sentence_replaces_the_step_rows(show, bundle):
    panel = show(TokensPanel(), 900, 600)
    runner = NumpyRunner(bundle)
    panel.set_trace(analyse(runner, "a long sentence with many merges in it, more than the next one"))
    short = analyse(runner, "hi")
    panel.set_trace(short)
    assert panel.step_list.model().rowCount() == len(short.tokenization.steps) + 1
