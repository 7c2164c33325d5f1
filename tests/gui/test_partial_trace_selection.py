"""A big model's panels ask for what their selection shows: selecting another layer (Attention) or an earlier
query (Next token) runs the sentence again for exactly that, and the panel then draws what a full trace gives."""
from __future__ import annotations

import numpy as np
import pytest

from core.runners import NumpyRunner
from core.trace_fields import trace_holds
from tests.gui.qt_helpers import settled, type_text

TEXT = "The cat sat on the mat. 你好"
WAIT_MS = 30000


@pytest.fixture
def big_window(make_window):
    window = make_window("numpy")
    window.controller.partial_trace_bytes = 0   # the test bundle treated as big: runs keep what panels ask for
    return window


def _settle(qtbot, window, wanted) -> None:
    qtbot.waitUntil(lambda: trace_holds(window.controller.trace, wanted) and not window.controller.busy()
                    and settled(window, TEXT), timeout=WAIT_MS)


def test_selecting_another_layer_fetches_its_attention_and_drops_the_others(qtbot, big_window, bundle):
    type_text(qtbot, big_window, TEXT)
    attention, c = big_window.panel("attention"), big_window.controller
    assert c.trace.layers[0].attn is not None and c.trace.layers[1].attn is None
    c.select({"layer": 1, "head": 2})
    _settle(qtbot, big_window, attention.fields)
    trace = c.trace
    assert trace.layers[0].attn is None   # what nobody looks at any more is not kept
    full = NumpyRunner(bundle).run(trace.input_ids)
    assert np.array_equal(trace.layers[1].attn, full.layers[1].attn)
    assert np.array_equal(trace.layers[1].scores, full.layers[1].scores)
    attention.flush()
    assert not attention.showing_empty_state() and attention.shown == (1, 2)


def test_the_attention_panel_draws_the_same_from_its_request_as_from_the_full_trace(qtbot, big_window):
    type_text(qtbot, big_window, TEXT)
    c, attention = big_window.controller, big_window.panel("attention")
    c.select({"layer": 1, "head": 3, "query": 5, "key": 2})
    _settle(qtbot, big_window, attention.fields)
    attention.flush()
    partial = attention.grab().toImage()
    grid = attention.grid.images[0][1].image.copy()
    c.fetch_fields(None)
    qtbot.waitUntil(lambda: c.trace.fields is None and settled(big_window, TEXT), timeout=WAIT_MS)
    attention.flush()
    assert np.array_equal(attention.grid.images[0][1].image, grid)
    assert attention.grab().toImage() == partial


def test_an_earlier_query_fetches_the_logits_the_next_token_panel_shows(qtbot, big_window, bundle):
    type_text(qtbot, big_window, TEXT)
    c, next_token = big_window.controller, big_window.panel("next_token")
    assert c.trace.logits.shape[0] == 1   # the last position's row alone
    c.select({"query": 3})
    _settle(qtbot, big_window, next_token.fields)
    next_token.flush()
    full = NumpyRunner(bundle).run(c.trace.input_ids)
    assert c.trace.logits_from <= 3
    assert np.allclose(c.trace.logits_at(3), full.logits[3], rtol=1e-5, atol=1e-6)
    assert next_token.position == 3 and not next_token.showing_empty_state()
    assert int(next_token.candidates.ids[0]) == int(np.argmax(full.logits[3]))


def _drawn(qtbot, panel) -> None:
    """Wait until the panel draws (the lens computes on a worker of its own), not its empty state, and
    its deferred touches (the lens's cell labels, fitted after the layout) are done."""
    def drawn() -> bool:
        panel.flush()
        return not panel.showing_empty_state()
    qtbot.waitUntil(drawn, timeout=WAIT_MS)
    qtbot.wait(500)


@pytest.mark.parametrize("name", ["logit_lens", "attribution", "positions", "step", "moe", "interventions"])
def test_a_panel_brought_up_draws_the_same_from_its_request_as_from_the_full_trace(qtbot, big_window, name):
    type_text(qtbot, big_window, TEXT)
    c = big_window.controller
    big_window.docks[name].raise_()
    panel = big_window.panel(name)
    _settle(qtbot, big_window, panel.fields)
    assert c.trace.fields is not None and not trace_holds(c.trace, None)
    _drawn(qtbot, panel)
    partial = panel.grab().toImage()
    c.fetch_fields(None)
    qtbot.waitUntil(lambda: c.trace.fields is None and settled(big_window, TEXT), timeout=WAIT_MS)
    _drawn(qtbot, panel)
    assert panel.grab().toImage() == partial


@pytest.mark.parametrize("name", ["patching", "head_roles"])
def test_a_panel_that_reads_little_of_the_trace_draws_from_its_request(qtbot, big_window, name):
    # their numbers come from runs of their own (patching) or from the probe too (head roles):
    # what the trace gives them is the ids, and for head roles every layer's attention
    type_text(qtbot, big_window, TEXT)
    big_window.docks[name].raise_()
    panel = big_window.panel(name)
    _settle(qtbot, big_window, panel.fields)
    assert big_window.controller.trace.fields is not None
    _drawn(qtbot, panel)


def test_layers_clicked_faster_than_runs_end_with_the_last_ones_attention(qtbot, big_window):
    type_text(qtbot, big_window, TEXT)
    c, attention = big_window.controller, big_window.panel("attention")
    c.select({"layer": 1})
    c.select({"layer": 0})   # before the run for layer 1 is back: that run's trace is not the one to keep
    c.select({"layer": 1})
    _settle(qtbot, big_window, attention.fields)
    _drawn(qtbot, attention)
    assert c.trace.layers[1].attn is not None and attention.shown[0] == 1
