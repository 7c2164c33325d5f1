"""A panel that reads only the tokens takes the run's trace without drawing again when it shows that run's
tokens-only trace (core.session.tokens_trace) with the same selection, and draws when anything differs."""
from __future__ import annotations

import pytest

from core.runners import NumpyRunner
from core.session import prepare_text, run_prepared, tokens_trace
from gui.panels.tokens_panel import TokensPanel
from gui.selection import Selection


@pytest.fixture()
def run_of(bundle):
    """run_of(text) -> (its tokens-only trace, the run's trace): one tokenization, as one run has."""
    def run(text: str):
        prepared = prepare_text(bundle.tokenizer, text, bundle.context)
        return tokens_trace(bundle, "numpy", prepared), run_prepared(NumpyRunner(bundle), prepared)
    return run


@pytest.fixture()
def panel(show, monkeypatch):
    panel = show(TokensPanel())
    panel.draws, panel.chip_sets = [], []
    draw, set_chips = panel.draw, panel.chips.set_chips
    monkeypatch.setattr(panel, "draw", lambda: (panel.draws.append(panel.trace), draw()))
    monkeypatch.setattr(panel.chips, "set_chips", lambda *a: (panel.chip_sets.append(len(a[0])), set_chips(*a)))
    return panel


def test_the_runs_trace_is_taken_without_drawing(panel, run_of):
    early, full = run_of("The cat sat on the mat.")
    panel.post_trace(early, Selection(), paced=False)
    panel.flush()
    panel.post_trace(full, Selection())
    assert panel.trace is full and not panel.has_posted() and panel.draws == [early]


def test_another_selection_draws_the_runs_trace_and_only_marks_the_chips(panel, run_of):
    early, full = run_of("The cat sat on the mat.")
    panel.post_trace(early, Selection(), paced=False)
    panel.flush()
    panel.post_trace(full, Selection(query=2))
    assert panel.has_posted()
    panel.flush()
    assert panel.draws == [early, full] and panel.chips._marked == 2
    assert panel.chip_sets == [early.n_tokens]   # the same tokenization: the chips are not built again


def test_a_post_waiting_is_not_skipped(panel, run_of):
    early, full = run_of("The cat sat on the mat.")
    other, _ = run_of("订单成交。")
    panel.post_trace(early, Selection(), paced=False)
    panel.flush()
    panel.post_trace(other, Selection(), paced=False)   # not drawn yet
    panel.post_trace(full, Selection())
    panel.flush()
    assert panel.trace is full and panel.draws == [early, full]   # drawn: `other` was waiting in its place
