"""A big model runs with only the fields the panels on screen declare (Panel.fields); the rest is fetched
when a panel that needs it comes into view, or when an export needs the whole trace."""
from __future__ import annotations

import numpy as np
import pytest

from core.attention_summary import summaries
from core.parity import field_difference, field_tolerance
from core.runners import NumpyRunner
from core.trace import output_names
from core.trace_fields import trace_holds
from tests.gui.qt_helpers import settled, type_text

TEXT = "The cat sat on the mat. 你好"
WAIT_MS = 30000


@pytest.fixture
def big_window(make_window):
    """A window that treats the test bundle as big: every run keeps only what the panels on screen draw."""
    window = make_window("numpy")
    window.controller.partial_trace_bytes = 0
    return window


def _picture(panel):
    """What the panel shows, pixel for pixel (its tables need every field: exports fetch them first)."""
    return panel.grab().toImage()


def test_the_visible_panels_draw_a_partial_trace_as_they_draw_the_full_one(qtbot, big_window, bundle):
    type_text(qtbot, big_window, TEXT)
    # the grid's probe badges arrive from the experiment worker when they will: both pictures must have them
    qtbot.waitUntil(lambda: big_window.panel("attention").probe is not None and settled(big_window, TEXT),
                    timeout=WAIT_MS)
    trace = big_window.controller.trace
    on_screen = [p for p in big_window.panels if big_window.on_screen(p)]
    assert trace.fields is not None and {p.object_name for p in on_screen} >= {"tokens", "attention", "next_token"}
    assert len(trace.fields) < len(output_names(bundle.config.num_hidden_layers))
    full = NumpyRunner(bundle).run(trace.input_ids)
    expected = full.to_arrays()
    for l, layer in enumerate(full.layers):   # the grid's summaries: what core.attention_summary makes of attn
        expected.update({f"layers.{l}.{name}": value for name, value in summaries(layer.attn).items()})
    expected["logits"] = full.logits[trace.logits_from:]   # the last row: a matrix-vector product, summed in
    for name in trace.fields:                              # another order than the full run's (core.parity's rule)
        held = trace.to_arrays()[name]
        assert held.shape == expected[name].shape, name
        assert field_difference(held, expected[name]) <= field_tolerance(expected[name]), name
    drawn_partial = {}
    for panel in on_screen:
        assert not panel.showing_empty_state(), panel.object_name
        drawn_partial[panel.object_name] = _picture(panel)
    big_window.controller.fetch_fields(None)   # the same sentence again, with every field
    qtbot.waitUntil(lambda: big_window.controller.trace.fields is None and settled(big_window, TEXT),
                    timeout=WAIT_MS)
    for panel in on_screen:
        assert _picture(panel) == drawn_partial[panel.object_name], panel.object_name


def test_showing_a_hidden_panel_fetches_what_it_needs_then_draws(qtbot, big_window):
    type_text(qtbot, big_window, TEXT)
    positions = big_window.panel("positions")
    assert not big_window.on_screen(positions)
    assert not trace_holds(big_window.controller.trace, positions.fields)
    big_window.docks["positions"].raise_()
    qtbot.waitUntil(lambda: trace_holds(big_window.controller.trace, positions.fields)
                    and settled(big_window, TEXT), timeout=WAIT_MS)
    assert big_window.on_screen(positions) and not positions.showing_empty_state()
    assert set(big_window.controller.trace.fields) >= set(positions.fields)


def test_a_panel_given_a_trace_without_its_fields_says_what_it_needs(qtbot, big_window):
    type_text(qtbot, big_window, TEXT)
    moe = big_window.panel("moe")
    moe.set_trace(big_window.controller.trace)
    assert moe.showing_empty_state() and "router_probs" in moe.empty.text()


def test_export_all_on_a_partial_trace_fetches_the_whole_trace_first(qtbot, big_window, bundle, tmp_path):
    type_text(qtbot, big_window, TEXT)
    assert big_window.controller.trace.fields is not None
    out = tmp_path / "figures"
    with qtbot.waitSignal(big_window.controller.sigFilesWritten, timeout=WAIT_MS) as written:
        big_window.export_all_to(out, formats=("png", "csv", "npz"))
    assert "trace.npz" in {p.name for p in written.args[0]}
    with np.load(out / "trace.npz") as npz:
        assert set(output_names(bundle.config.num_hidden_layers)) <= set(npz.files)
    assert big_window.controller.trace.fields is None


def test_a_small_model_and_the_parity_backend_keep_the_whole_trace(make_window):
    small = make_window("numpy").controller
    assert small.fields_to_run() is None   # the test bundle is far below PARTIAL_TRACE_BYTES
    small.partial_trace_bytes = 0
    assert small.fields_to_run() is not None
    both = make_window("both").controller
    both.partial_trace_bytes = 0
    assert both.fields_to_run() is None    # parity compares whole traces
