"""Role badges on the attention grid's thumbnails: the scores of core.head_roles, the probe run on the worker."""
from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest

from core.head_roles import ROLE_NAMES, probe_roles, sentence_roles
from core.role_badges import BADGE_THRESHOLD, BADGES, badge_mask, head_badges
from core.runners import NumpyRunner
from core.session import analyse
from gui.panels.attention_panel import AttentionPanel
from tests.gui.qt_helpers import hover, type_text

SENTENCE = "The cat sat on the mat because it was tired."


@pytest.fixture(scope="module")
def trace(bundle):
    return analyse(NumpyRunner(bundle), SENTENCE)


def with_previous_token_head(trace, layer: int, head: int):
    """The real trace with one head made a pure previous-token head: query i attends to key i-1 only."""
    n = trace.n_tokens
    pattern = np.zeros((n, n), np.float32)
    pattern[np.arange(n), np.maximum(np.arange(n) - 1, 0)] = 1.0
    attn = np.array(trace.layers[layer].attn)
    attn[head] = pattern
    layers = list(trace.layers)
    layers[layer] = replace(trace.layers[layer], attn=attn)
    return replace(trace, layers=tuple(layers))


def test_a_planted_previous_token_head_wears_the_prev_badge(show, trace):
    planted = with_previous_token_head(trace, 1, 2)
    panel = show(AttentionPanel(), 1200, 800)
    panel.set_trace(planted)
    shown = panel.grid.badge_texts()
    assert "prev" in shown[1][2].split()
    roles = sentence_roles(planted)
    assert roles.score(1, 2, "previous_token") == pytest.approx(1.0)
    expected = [[" ".join(names) for names in row] for row in head_badges(roles, None)]
    assert shown == expected   # every thumbnail carries exactly the badges its scores earn
    assert panel.grid.badges[1][2].isVisible()


def test_the_tooltip_gives_the_scores(show, trace, qtbot):
    planted = with_previous_token_head(trace, 0, 3)
    panel = show(AttentionPanel(), 1200, 800)
    panel.set_trace(planted)
    qtbot.wait(30)
    hover(panel.grid.viewport(), panel.grid.head_point(0, 3))
    qtbot.waitUntil(lambda: "prev = previous token: 1.00" in panel.grid.toolTip(), timeout=5000)
    assert "probe" in panel.grid.toolTip()


def test_badges_follow_the_threshold_on_either_score(trace):
    roles = sentence_roles(trace)
    probe = replace(roles, scores=np.zeros_like(roles.scores))
    earned = badge_mask(roles, probe)
    np.testing.assert_array_equal(earned, np.nan_to_num(roles.scores, nan=-1) >= BADGE_THRESHOLD)
    induction = np.zeros_like(roles.scores)
    induction[..., ROLE_NAMES.index("induction")] = 1.0   # every head an induction head on the probe
    assert all(BADGES["induction"] in names for row in head_badges(roles, replace(roles, scores=induction))
               for names in row)


def test_the_probe_runs_on_the_worker_and_its_badges_show(qtbot, make_window, bundle, monkeypatch):
    import gui.controller as controller

    threads = []

    def recording_probe(runner, *args, **kwargs):
        threads.append(threading.current_thread())
        return probe_roles(runner, *args, **kwargs)

    monkeypatch.setattr(controller, "probe_roles", recording_probe)
    window = make_window("numpy")
    type_text(qtbot, window, SENTENCE)
    panel = window.panel("attention")
    qtbot.waitUntil(lambda: panel.probe is not None, timeout=30000)
    assert threads and all(t is not threading.main_thread() for t in threads)
    expected = probe_roles(NumpyRunner(bundle))
    np.testing.assert_allclose(panel.probe.scores, expected.scores, atol=1e-5, equal_nan=True)
    shown = panel.grid.badge_texts()
    assert shown == [[" ".join(names) for names in row]
                     for row in head_badges(sentence_roles(window.controller.trace), panel.probe)]


def test_the_shipped_models_previous_token_head_is_badged(qtbot, settings):
    """The model card's L0.H2 is a previous-token head (0.79 on the probe): its thumbnail says so."""
    from core.bundle import load_bundle
    from gui.controller import Controller
    from gui.fonts import register_fonts
    from gui.main_window import MainWindow

    register_fonts()
    window = MainWindow(Controller(load_bundle(None), "onnx"), settings)
    qtbot.addWidget(window)
    window.resize(1400, 900)
    window.show()
    try:
        type_text(qtbot, window, "订单成功了。订单")
        panel = window.panel("attention")
        qtbot.waitUntil(lambda: panel.probe is not None and panel.trace is window.controller.trace, timeout=30000)
        assert panel.probe.score(0, 2, "previous_token") >= BADGE_THRESHOLD
        assert "prev" in panel.grid.badge_texts()[0][2].split()
    finally:
        window.close()
