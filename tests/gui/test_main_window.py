"""The main window end to end: type, wait for the worker, check what every panel shows."""
from __future__ import annotations

import shutil
import threading
import time

import numpy as np
import pytest
from PySide6.QtCore import Qt

import gui.controller as controller_module
from core.runners import NumpyRunner
from core.sampling import SamplingSettings, generate
from core.session import analyse
from gui.main_window import MainWindow
from tests.gui.qt_helpers import hover, settled, type_text

ENGLISH = "The cat sat on the mat because it was tired."
CHINESE = "订单成交，订单取消，查询订单。"
WAIT_MS = 20000


@pytest.fixture()
def window(make_window):
    return make_window()


def shown_pieces(window: MainWindow) -> list[str]:
    chips = window.panel("tokens").chips
    return [chips.chip_lines(i)[0] for i in range(chips.chip_count())]


def test_typing_english_then_chinese_shows_that_sentences_tokens(qtbot, window, bundle):
    for text in (ENGLISH, CHINESE):
        type_text(qtbot, window, text)
        expected = analyse(NumpyRunner(bundle), text).tokenization
        assert shown_pieces(window) == [t.display for t in expected.tokens]
        assert window.panel("tokens").trace is window.controller.trace
        n = len(expected.tokens)
        assert window.tokens_label.text() == f"{n} / {bundle.config.max_position_embeddings} tokens"
        assert window.time_label.text().startswith("forward ")


def test_visible_panels_all_show_the_current_trace(qtbot, window):
    type_text(qtbot, window, CHINESE)
    for panel in window.panels:
        if window.on_screen(panel):
            assert panel.trace is window.controller.trace, panel.object_name


def test_attention_panel_shows_the_selected_head(qtbot, make_window):
    from gui.panels.attention_panel import AttentionPanel
    from gui.panels.tokens_panel import TokensPanel

    window = make_window(panel_classes=[TokensPanel, AttentionPanel])
    attention = window.panel("attention")
    type_text(qtbot, window, ENGLISH)
    window.docks["attention"].raise_()
    qtbot.waitUntil(attention.isVisible)
    window.controller.select({"layer": 1, "head": 2})
    qtbot.waitUntil(lambda: attention.shown == (1, 2), timeout=WAIT_MS)


def test_a_click_in_one_panel_selects_everywhere(qtbot, window):
    type_text(qtbot, window, ENGLISH)
    chips = window.panel("tokens").chips
    qtbot.mouseClick(chips, Qt.MouseButton.LeftButton, pos=chips.chip_rect(3).center().toPoint())
    assert window.controller.selection.query == 3
    for panel in window.panels:
        if window.on_screen(panel):
            assert panel.selection.query == 3, panel.object_name
    window.bring_all_up_to_date()
    assert all(panel.selection.query == 3 for panel in window.panels)


def test_hovering_a_token_highlights_its_characters_in_the_sentence_bar(qtbot, window):
    type_text(qtbot, window, CHINESE)
    chips = window.panel("tokens").chips
    token = window.controller.trace.tokenization.tokens[1]
    hover(chips, chips.chip_rect(1).center().toPoint())
    qtbot.waitUntil(lambda: window.sentence_bar.highlighted_span() is not None)
    assert window.sentence_bar.highlighted_span() == (token.char_start, token.char_end)


def test_a_result_for_old_text_is_never_shown(qtbot, window, monkeypatch):
    """The first text's run is slow and ends after the second text was typed: it must be dropped
    (stopped at its next checkpoint, or its result discarded)."""
    slow_text, fast_text = "the first, slow sentence", "the second sentence"
    original = controller_module.run_with_backend
    slow_started, slow_finished = threading.Event(), threading.Event()

    def run(runners, backend, state, **kwargs):
        if state.text == slow_text:
            slow_started.set()
            time.sleep(1.0)
            try:
                return original(runners, backend, state, **kwargs)
            finally:
                slow_finished.set()
        return original(runners, backend, state, **kwargs)

    monkeypatch.setattr(controller_module, "run_with_backend", run)
    shown = []
    window.controller.sigTraceChanged.connect(lambda trace: shown.append(trace.text if trace else None))
    window.sentence_bar.setText(slow_text)
    qtbot.waitUntil(slow_started.is_set, timeout=WAIT_MS)
    window.sentence_bar.setText(fast_text)
    qtbot.waitUntil(lambda: settled(window, fast_text), timeout=WAIT_MS)
    assert slow_finished.is_set(), "the slow run should have ended (and been dropped)"
    qtbot.wait(100)
    assert shown == [fast_text]
    assert window.panel("tokens").trace.text == fast_text


def test_an_error_in_the_worker_is_reported_on_the_main_thread(qtbot, window, monkeypatch):
    original = controller_module.run_with_backend
    calls = []

    def failing(runners, backend, state, **kwargs):
        calls.append(threading.current_thread() is threading.main_thread())
        if state.text == "boom":
            raise RuntimeError("the forward pass exploded")
        return original(runners, backend, state, **kwargs)

    monkeypatch.setattr(controller_module, "run_with_backend", failing)
    window.sentence_bar.setText("boom")
    qtbot.waitUntil(lambda: window.last_error != "", timeout=WAIT_MS)
    assert window.last_error == "the forward pass exploded"
    assert calls == [False]   # it ran on the worker, and the message still reached the window
    type_text(qtbot, window, ENGLISH)   # the worker keeps serving


def test_bursts_of_typing_run_the_model_once_per_pause(qtbot, window, monkeypatch):
    runs = []
    original = controller_module.run_with_backend
    monkeypatch.setattr(controller_module, "run_with_backend",
                        lambda runners, backend, state, **kw: runs.append(state.text) or
                        original(runners, backend, state, **kw))
    for end in range(1, len(ENGLISH) + 1):
        window.sentence_bar.setText(ENGLISH[:end])
    qtbot.waitUntil(lambda: settled(window, ENGLISH), timeout=WAIT_MS)
    assert runs == [ENGLISH]


def test_empty_text_gives_every_panel_the_empty_state(qtbot, window):
    type_text(qtbot, window, ENGLISH)
    window.sentence_bar.setText("")
    qtbot.waitUntil(lambda: window.controller.trace is None and window.panel("tokens").trace is None,
                    timeout=WAIT_MS)
    assert window.last_error == ""
    assert window.tokens_label.text().startswith("0 /")


def test_text_past_the_context_is_cut_with_a_visible_notice(qtbot, window, bundle):
    context = bundle.config.max_position_embeddings
    text = "订单成交 and cats " * context
    window.sentence_bar.setText(text)
    qtbot.waitUntil(lambda: window.controller.trace is not None and not window.controller.busy(), timeout=WAIT_MS)
    trace = window.controller.trace
    assert trace.n_tokens <= context and trace.truncated_chars > 0
    assert window.notice.isVisible()
    assert f"cut at {context} tokens" in window.notice.text()
    assert f"last {trace.truncated_chars} characters" in window.notice.text()
    type_text(qtbot, window, ENGLISH)
    assert not window.notice.isVisible()


def test_append_then_step_back(qtbot, window):
    type_text(qtbot, window, ENGLISH)
    c, tokens = window.controller, window.panel("tokens")
    before = list(c.trace.input_ids)
    new_id = int(np.argmax(c.trace.logits[-1]))
    tokens.sigAppendTokens.emit([new_id])
    qtbot.waitUntil(lambda: c.trace.n_tokens == len(before) + 1 and not c.busy(), timeout=WAIT_MS)
    assert list(c.trace.input_ids) == before + [new_id]
    assert window.sentence_bar.text() == c.bundle.tokenizer.decode(before + [new_id])
    tokens.sigStepBack.emit()
    qtbot.waitUntil(lambda: c.trace.n_tokens == len(before) and not c.busy(), timeout=WAIT_MS)
    assert list(c.trace.input_ids) == before
    assert window.sentence_bar.text() == ENGLISH


def test_generate_appends_what_greedy_decoding_picks(qtbot, window, bundle):
    type_text(qtbot, window, ENGLISH)
    c = window.controller
    start = list(c.trace.input_ids)
    window.panel("tokens").sigGenerate.emit((4, SamplingSettings(greedy=True)))
    qtbot.waitUntil(lambda: c.trace.n_tokens == len(start) + 4 and not c.busy(), timeout=WAIT_MS)
    runner = NumpyRunner(bundle)
    expected = generate(lambda ids: runner.run(ids).logits[-1], start, 4, SamplingSettings(greedy=True))
    assert list(c.trace.input_ids) == expected
    window.panel("tokens").sigStepBack.emit()   # takes back one token, not the whole generation
    qtbot.waitUntil(lambda: list(c.trace.input_ids) == expected[:-1] and not c.busy(), timeout=WAIT_MS)


def test_step_back_takes_back_one_generated_token_per_press_down_to_the_typed_text(qtbot, window):
    n = 4
    type_text(qtbot, window, ENGLISH)
    c, panel = window.controller, window.panel("next_token")
    typed = c.trace.input_ids.tolist()
    assert not panel.step_back_button.isEnabled()   # nothing appended yet
    panel.greedy.setChecked(True)
    panel.generate_count.setValue(n)
    panel.generate_button.click()
    qtbot.waitUntil(lambda: c.trace.n_tokens == len(typed) + n and not c.busy(), timeout=WAIT_MS)
    generated = c.trace.input_ids.tolist()
    assert generated[:len(typed)] == typed
    for left in range(n - 1, -1, -1):   # each press: exactly the last token goes
        assert panel.step_back_button.isEnabled()
        panel.step_back_button.click()
        qtbot.waitUntil(lambda: c.trace.n_tokens == len(typed) + left and not c.busy(), timeout=WAIT_MS)
        assert c.trace.input_ids.tolist() == generated[:len(typed) + left]
    assert window.sentence_bar.text() == ENGLISH and c.trace.text == ENGLISH   # the typed text itself
    assert not panel.step_back_button.isEnabled()
    panel.sigStepBack.emit()   # asked all the same: the typed text keeps every token (decided at once, no run)
    assert c.text == ENGLISH and not c.busy() and c.trace.input_ids.tolist() == typed


def test_append_to_a_full_context_keeps_the_typed_text_and_gives_step_back_nothing(qtbot, window, bundle):
    context = bundle.config.max_position_embeddings
    typed = "订单成交 and cats " * context
    window.sentence_bar.setText(typed)
    qtbot.waitUntil(lambda: window.controller.trace is not None and not window.controller.busy(), timeout=WAIT_MS)
    c, panel = window.controller, window.panel("next_token")
    assert c.trace.n_tokens == context
    panel.sigAppendTokens.emit([int(np.argmax(c.trace.logits[-1]))])
    qtbot.waitUntil(lambda: "the context is full" in window.notice.text(), timeout=WAIT_MS)
    assert window.sentence_bar.text() == typed and c.text == typed   # not a decoding of the kept tokens
    assert not panel.step_back_button.isEnabled()


def test_a_variant_request_is_answered_with_that_intervention(qtbot, window, bundle):
    type_text(qtbot, window, ENGLISH)
    tokens = window.panel("tokens")
    answers = []
    tokens.set_variant = lambda tag, trace: answers.append((tag, trace))
    mask = np.ones((bundle.config.num_hidden_layers, bundle.config.num_attention_heads), np.float32)
    mask[0, 1] = 0.0
    tokens.sigRequestVariant.emit("ablate", {"head_mask": mask})
    qtbot.waitUntil(lambda: bool(answers), timeout=WAIT_MS)
    tag, trace = answers[0]
    assert tag == "ablate" and np.array_equal(trace.head_mask, mask)
    assert list(trace.input_ids) == list(window.controller.trace.input_ids)


def test_opening_a_bad_bundle_keeps_the_old_one(qtbot, window, bundle, tmp_path):
    type_text(qtbot, window, ENGLISH)
    broken = tmp_path / "broken"
    shutil.copytree(bundle.path, broken)
    (broken / "model.onnx").write_bytes(b"not an onnx file")
    window.controller.open_bundle(str(broken))
    qtbot.waitUntil(lambda: window.last_error != "", timeout=WAIT_MS)
    assert "could not open the bundle" in window.last_error and "model.onnx" in window.last_error
    assert window.controller.bundle is bundle
    assert window._message_box is not None and window._message_box.isVisible()
    type_text(qtbot, window, CHINESE)   # still works with the old bundle


def test_opening_another_bundle_rebuilds_the_runners(qtbot, window, make_bundle):
    type_text(qtbot, window, ENGLISH)
    other = make_bundle(seed=3)
    window.controller.open_bundle(str(other.path))
    qtbot.waitUntil(lambda: window.controller.bundle.path == other.path and settled(window, ENGLISH), timeout=WAIT_MS)
    expected = analyse(NumpyRunner(other), ENGLISH)
    assert np.allclose(window.controller.trace.logits, expected.logits, atol=1e-5)
    assert other.path.name in window.windowTitle()


def test_both_backends_show_their_largest_difference(qtbot, make_window):
    window = make_window("both")
    type_text(qtbot, window, CHINESE)
    assert window.controller.parity is not None and window.controller.parity < 1e-3
    assert window.parity_label.isVisible() and "ONNX↔NumPy" in window.parity_label.text()
    window.set_backend("numpy")
    qtbot.waitUntil(lambda: window.controller.parity is None and not window.controller.busy(), timeout=WAIT_MS)
    assert not window.parity_label.isVisible()


def test_a_panel_in_a_tab_behind_catches_up_when_its_tab_is_raised(qtbot, window):
    behind = [p for p in window.panels if p.isVisible() and not window.on_screen(p)]
    assert behind, "the default layout stacks some panels as tabs"
    panel = behind[0]
    type_text(qtbot, window, ENGLISH)
    assert panel.trace is None   # not drawn while nobody can see it
    window.docks[panel.object_name].raise_()
    qtbot.waitUntil(lambda: panel.trace is window.controller.trace)


def test_hidden_panels_catch_up_when_shown(qtbot, window):
    type_text(qtbot, window, ENGLISH)
    dock = window.docks["tokens"]
    dock.close()
    type_text(qtbot, window, CHINESE)
    assert window.panel("tokens").trace.text == ENGLISH   # not redrawn while closed
    dock.show()
    qtbot.waitUntil(lambda: window.panel("tokens").trace is window.controller.trace)


def test_layout_sentence_and_model_persist_and_reset_layout_restores(qtbot, make_window, settings, bundle):
    first = make_window()
    type_text(qtbot, first, CHINESE)
    first.docks["tokens"].close()
    first.close()
    assert settings.value("sentence/last") == CHINESE
    assert settings.value("model/last") == str(bundle.path)

    second = make_window()
    assert second.docks["tokens"].isHidden()
    second.place_default_layout()
    qtbot.waitUntil(second.docks["tokens"].isVisible)
    assert all(not dock.isFloating() for dock in second.docks.values())


def test_menus_offer_the_expected_shortcuts(window):
    shortcuts = {a.text().replace("&", ""): a.shortcut().toString()
                 for menu in window.menuBar().findChildren(type(window.view_menu)) for a in menu.actions()}
    assert shortcuts["Open bundle…"] == "Ctrl+Shift+O"
    assert shortcuts["Export figure…"] == "Ctrl+E"
    assert shortcuts["Export all…"] == "Ctrl+Shift+E"
    assert shortcuts["Quit"] == "Ctrl+Q"
    assert all(window.docks[p.object_name].toggleViewAction() in window.view_menu.actions() for p in window.panels)


def test_about_shows_the_model_card(qtbot, window, bundle):
    window.show_about()
    assert window._about.isVisible()
    first_line = bundle.model_card.strip().splitlines()[0].lstrip("# ").strip()
    assert first_line in window._about_text.toPlainText()


def test_export_all_writes_every_figure_and_the_trace(qtbot, window, tmp_path):
    type_text(qtbot, window, CHINESE)
    out = tmp_path / "figures"
    # what the panels offer when Export all is chosen (a sweep finishing meanwhile adds its figure after)
    expected = {f"{f.name}.{ext}" for p in window.panels for f in p.figures() for ext in ("png", "svg")}
    with qtbot.waitSignal(window.controller.sigFilesWritten, timeout=WAIT_MS) as written:
        window.export_all_to(out)
    names = {p.name for p in written.args[0]}
    assert expected <= names and {"trace.npz", "tokens.csv"} <= names
    assert all((out / name).is_file() for name in names)


def test_the_worker_thread_stops_when_the_window_closes(qtbot, make_window):
    window = make_window()
    type_text(qtbot, window, ENGLISH)
    assert window.controller.is_running()
    window.close()
    assert not window.controller.is_running()
    window.controller.shutdown()   # twice is harmless


def test_a_bad_start_bundle_says_so_and_falls_back_to_the_shipped_one(monkeypatch, tmp_path):
    import gui.app as app_module
    from core.bundle import DEFAULT_BUNDLE

    shown = []
    monkeypatch.setattr(app_module.QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    bundle = app_module.start_bundle(str(tmp_path / "missing"), None)
    assert bundle.path == DEFAULT_BUNDLE
    assert len(shown) == 1 and "missing" in shown[0] and "shipped model" in shown[0]


def test_when_even_the_shipped_bundle_fails_the_app_exits_with_one_line(monkeypatch, capsys, qapp, settings):
    import gui.app as app_module
    from core.bundle import BundleError

    def broken(path=None):
        raise BundleError(f"{path or 'resources/model'}: missing")

    monkeypatch.setattr(app_module, "load_bundle", broken)
    monkeypatch.setattr(app_module.QMessageBox, "warning", lambda *args: None)
    monkeypatch.setattr(app_module, "default_settings", lambda: settings)
    assert app_module.run_app(model="/nowhere") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("glassbox: error:")
