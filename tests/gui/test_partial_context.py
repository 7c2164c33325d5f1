"""A big model's app takes sentences past the context a full trace allows (Bundle.context) when its runs are
partial, up to what the panels on screen keep fits in memory; a wider request that would not fit is refused
with one message, and the trace shown stays as it was (not cut to a shorter sentence)."""
from __future__ import annotations

import pytest

from core.bench import text_of_tokens
from core.bundle import trace_bytes
from core.runners import fields_context
from tests.gui.qt_helpers import type_text

FULL_CONTEXT = 20
WAIT_MS = 30000


@pytest.fixture
def big_window(make_window, bundle, monkeypatch):
    monkeypatch.setattr("core.bundle.MAX_TRACE_BYTES", trace_bytes(bundle.config, FULL_CONTEXT))
    window = make_window("numpy")
    window.controller.partial_trace_bytes = 0   # the test bundle treated as big: runs keep what panels ask for
    return window


def test_a_sentence_past_the_full_traces_context_is_analysed_whole(qtbot, big_window, bundle):
    c = big_window.controller
    assert bundle.context == FULL_CONTEXT
    fits = fields_context(bundle, c.fields_to_run())
    assert c.context == fits > 2 * FULL_CONTEXT
    text = text_of_tokens(bundle.tokenizer, 2 * FULL_CONTEXT)
    n_tokens = len(bundle.tokenizer.encode(text))
    notices = []
    c.sigNotice.connect(notices.append)
    type_text(qtbot, big_window, text)
    qtbot.waitUntil(lambda: c.trace is not None and c.trace.text == text and not c.busy(), timeout=WAIT_MS)
    assert c.trace.n_tokens == n_tokens > FULL_CONTEXT and c.trace.truncated_chars == 0
    assert not any("cut" in notice for notice in notices)


def test_a_request_that_would_not_fit_is_refused_and_the_trace_kept(qtbot, big_window, bundle):
    c = big_window.controller
    text = text_of_tokens(bundle.tokenizer, 2 * FULL_CONTEXT)
    type_text(qtbot, big_window, text)
    qtbot.waitUntil(lambda: c.trace is not None and c.trace.text == text and not c.busy(), timeout=WAIT_MS)
    shown, errors = c.trace, []
    c.sigError.connect(errors.append)
    c.fetch_fields(None)   # every field: a full trace of this many tokens is past the budget
    assert len(errors) == 1 and "fits in memory" in errors[0] and f"at most {FULL_CONTEXT}" in errors[0]
    assert c.trace is shown and not c.busy()
