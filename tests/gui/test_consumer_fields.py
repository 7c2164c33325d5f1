"""The Next token panel and the MoE what-if ask a big model's runs for exactly what they read: given runs that
hold only their requests (an earlier query's rows of logits, not all T x V), they draw what full traces give."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from core.runners import NumpyRunner
from core.session import prepare_text, run_prepared
from core.trace_fields import logits_from, trace_holds
from gui.panels.moe_panel import MoePanel
from gui.panels.next_token_panel import NextTokenPanel
from gui.selection import Selection

TEXT = "The cat sat on the mat and looked at the door."
LAYER, QUERY = 1, 3


@pytest.fixture(scope="module")
def runs(bundle):
    """runs(fields=None, **interventions) -> the Trace of TEXT keeping only `fields` (None: every field)."""
    runner = NumpyRunner(bundle)
    prepared = prepare_text(bundle.tokenizer, TEXT, bundle.context)
    return lambda fields=None, **interventions: run_prepared(runner, prepared, fields=fields, **interventions)


def _drawn(panel, trace, selection):
    panel.set_selection(selection)
    panel.set_trace(trace)
    assert not panel.showing_empty_state()
    return panel


def test_next_token_at_an_earlier_query_keeps_only_the_rows_from_it(show, runs):
    selection = Selection(query=QUERY)
    partial_panel = show(NextTokenPanel())
    partial_panel.set_selection(selection)
    assert partial_panel.fields == (logits_from(QUERY),)
    partial = runs(partial_panel.fields)
    assert partial.logits_from == QUERY and partial.logits.shape[0] == partial.n_tokens - QUERY
    _drawn(partial_panel, partial, selection)
    full_panel = _drawn(show(NextTokenPanel()), runs(), selection)
    assert partial_panel.header.text() == full_panel.header.text()
    np.testing.assert_array_equal(partial_panel.candidates.ids, full_panel.candidates.ids)
    np.testing.assert_allclose(partial_panel.candidates.probability, full_panel.candidates.probability, atol=1e-6)


def _whatif(qtbot, panel, runs, before, selection):
    """Run the panel's what-if on `before`, the forced run keeping what the panel asked for; its status text."""
    _drawn(panel, before, selection)
    expert = next(e for e in range(before.config.num_local_experts)
                  if e not in before.layers[LAYER].expert_ids[QUERY])
    panel.whatif.expert_box.setCurrentIndex(expert)
    with qtbot.waitSignal(panel.sigRequestVariant) as blocker:
        qtbot.mouseClick(panel.whatif.run_button, Qt.MouseButton.LeftButton)
    tag, request = blocker.args
    fields = request.pop("fields")
    after = runs(fields, **request)
    panel.set_variant(tag, after)
    assert panel.result is not None
    return fields, panel.whatif.status.text(), [c.after for c in panel.whatif.changes]


def test_the_moe_whatif_runs_on_exactly_the_fields_it_requests(qtbot, show, runs):
    selection = Selection(layer=LAYER, query=QUERY)
    partial_panel = show(MoePanel(), 900, 600)
    partial_panel.set_selection(selection)
    before = runs(partial_panel.fields)
    assert trace_holds(before, partial_panel.fields) and before.logits_from == QUERY
    assert before.layers[LAYER].router_probs is not None and before.layers[0].router_probs is None
    fields, status, after = _whatif(qtbot, partial_panel, runs, before, selection)
    assert "logits" not in fields and logits_from(QUERY) in fields
    _, full_status, full_after = _whatif(qtbot, show(MoePanel(), 900, 600), runs, runs(), selection)
    assert status == full_status
    np.testing.assert_allclose(after, full_after, atol=1e-6)
