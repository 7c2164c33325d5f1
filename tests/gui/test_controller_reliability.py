"""The controller under pressure: nothing tokenizes on the UI thread, long jobs stop, closing never waits
on model work, and a bundle or backend that cannot run never replaces the one that works."""
from __future__ import annotations

import shutil
import threading

import numpy as np
import onnx
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from tests.gui import qt_helpers
import gui.controller as controller_module
from core.runners import NumpyRunner
from core.session import prepare_text
from core.tokenizer import clean_text
from gui.controller import WORKER_NAME, Controller
from gui.fonts import register_fonts
from gui.main_window import MainWindow

ENGLISH = "The cat sat on the mat because it was tired."
WAIT_MS = 30000


def worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == WORKER_NAME]


@pytest.fixture(autouse=True)
def no_leaked_workers(qtbot):
    before = set(worker_threads())
    yield
    qtbot.waitUntil(lambda: not set(worker_threads()) - before, timeout=WAIT_MS)


@pytest.fixture()
def make_window(qtbot, bundle, settings):
    windows = []

    def make(backend: str = "numpy") -> MainWindow:
        register_fonts()
        window = MainWindow(Controller(bundle, backend), settings)   # closed below, after blocked runs are let go
        window.resize(1200, 800)
        window.show()
        qtbot.waitExposed(window)
        windows.append(window)
        return window

    yield make
    for blocker in BLOCKERS:   # a test that failed mid-way must not leave a run blocked for ever
        blocker.release.set()
    BLOCKERS.clear()
    for window in windows:
        window.close()


@pytest.fixture()
def window(make_window):
    return make_window()


def type_text(qtbot, window: MainWindow, text: str) -> None:
    qt_helpers.type_text(qtbot, window, text, WAIT_MS)


@pytest.fixture()
def tokenizer_calls(monkeypatch, bundle):
    """Every encode / encode_traced of the bundle's tokenizer: (method, thread is main, text length)."""
    calls = []
    tokenizer = bundle.tokenizer
    for name in ("encode", "encode_traced"):
        original = getattr(tokenizer, name)

        def spy(text, _name=name, _original=original):
            calls.append((_name, threading.current_thread() is threading.main_thread(), len(text)))
            return _original(text)

        monkeypatch.setattr(tokenizer, name, spy)
    return calls


BLOCKERS: list["BlockingRunner"] = []   # released when the windows close, whatever the test did


class BlockingRunner:
    """Wraps a runner; a run of `blocked_ids` waits for `release` (as a long forward pass would)."""

    def __init__(self, inner, blocked_ids: list[int]) -> None:
        self.inner, self.bundle, self.name = inner, inner.bundle, inner.name
        self.blocked_ids = list(blocked_ids)
        self.started, self.release = threading.Event(), threading.Event()
        self.runs: list[list[int]] = []
        BLOCKERS.append(self)

    def run(self, ids, **kwargs):
        ids = [int(i) for i in ids]
        self.runs.append(ids)
        if ids == self.blocked_ids:
            self.started.set()
            self.release.wait()
        return self.inner.run(ids, **kwargs)


def block_runs_of(monkeypatch, bundle, text: str, backend: str = "numpy") -> BlockingRunner:
    """Make every runner the controller builds block on runs of `text`'s ids; returns the blocker."""
    ids = bundle.tokenizer.encode(text)
    blocker = BlockingRunner(NumpyRunner(bundle), ids)
    counting = {"numpy": blocker}

    def get(self, name):
        if name not in counting:
            counting[name] = BlockingRunner(NumpyRunner(self.bundle), [])   # never blocks; counts runs
        return counting[name]

    monkeypatch.setattr(controller_module.Runners, "get", get)
    blocker.others = counting
    return blocker


# ---------------------------------------------------------------- nothing tokenizes on the UI thread

def test_append_step_back_and_generate_never_tokenize_on_the_ui_thread(qtbot, window, tokenizer_calls):
    from core.sampling import SamplingSettings

    c, tokens = window.controller, window.panel("tokens")
    typed = ENGLISH + " and"   # later: typed text whose ids the UI thread does not know
    typed_ids = c.bundle.tokenizer.encode(typed)
    tokenizer_calls.clear()   # that was the test's own tokenization
    type_text(qtbot, window, ENGLISH)
    before = c.trace.input_ids.tolist()
    tokens.sigAppendTokens.emit([int(np.argmax(c.trace.logits[-1]))])
    qtbot.waitUntil(lambda: c.trace.n_tokens == len(before) + 1 and not c.busy(), timeout=WAIT_MS)
    tokens.sigStepBack.emit()
    qtbot.waitUntil(lambda: c.trace.input_ids.tolist() == before and not c.busy(), timeout=WAIT_MS)
    window.sentence_bar.setText(typed)
    tokens.sigAppendTokens.emit([typed_ids[-1]])   # waits for the typed text's ids, which its run brings
    tokens.sigStepBack.emit()
    qtbot.waitUntil(lambda: c.trace.input_ids.tolist() == typed_ids and not c.busy(), timeout=WAIT_MS)
    tokens.sigGenerate.emit((2, SamplingSettings(greedy=True)))
    qtbot.waitUntil(lambda: c.trace.n_tokens == len(typed_ids) + 2 and not c.busy(), timeout=WAIT_MS)
    assert tokenizer_calls, "the spy saw no tokenization at all"
    assert [call for call in tokenizer_calls if call[1]] == []


def test_an_append_tokenizes_its_run_once(qtbot, make_window, tokenizer_calls):
    window = make_window("both")   # two runners, still one tokenization
    c = window.controller
    type_text(qtbot, window, ENGLISH)
    before = c.trace.input_ids.tolist()
    tokenizer_calls.clear()
    window.panel("tokens").sigAppendTokens.emit([int(np.argmax(c.trace.logits[-1]))])
    qtbot.waitUntil(lambda: c.trace.n_tokens == len(before) + 1 and not c.busy(), timeout=WAIT_MS)
    assert [name for name, _, _ in tokenizer_calls] == ["encode_traced"]


def test_an_append_clicked_before_the_typed_text_was_analysed_applies_to_that_text(qtbot, window, bundle):
    c = window.controller
    extra = bundle.tokenizer.encode(" mat")
    window.sentence_bar.setText(ENGLISH)
    window.panel("tokens").sigAppendTokens.emit(extra[:1])   # two quick clicks, before any run came back
    window.panel("tokens").sigAppendTokens.emit(extra[:1])
    expected = bundle.tokenizer.encode(ENGLISH) + extra[:1] * 2
    qtbot.waitUntil(lambda: c.trace is not None and c.trace.input_ids.tolist() == expected and not c.busy(),
                    timeout=WAIT_MS)
    assert window.sentence_bar.text() == bundle.tokenizer.decode(expected)


def test_a_typed_sentence_is_tokenized_once(qtbot, make_window, tokenizer_calls):
    window = make_window("both")   # two runners, one tokenization
    type_text(qtbot, window, ENGLISH)
    assert [name for name, _, _ in tokenizer_calls] == ["encode_traced"]


def test_a_long_text_is_traced_only_as_far_as_the_context(bundle, tokenizer_calls):
    text = "订单成交 and the cat sat. " * 4000   # 100k characters; tracing merges over all of it took seconds
    context = bundle.config.max_position_embeddings
    prepared = prepare_text(bundle.tokenizer, text, context)
    assert len(prepared.tokenization.tokens) <= context and prepared.truncated_chars > 0
    traced = [length for name, _, length in tokenizer_calls if name == "encode_traced"]
    assert traced == [len(prepared.tokenization.text)]


def _reference_prepare(tokenizer, text: str, max_tokens: int):
    """The cut as defined before: tokenize everything with merges traced, then re-encode prefixes."""
    full = tokenizer.encode_traced(text)
    if len(full.tokens) <= max_tokens:
        return full.ids, 0
    cut = full.tokens[max_tokens].char_start
    kept = tokenizer.encode_traced(full.text[:cut])
    while len(kept.tokens) > max_tokens and cut > 0:
        cut = kept.tokens[max_tokens].char_start
        kept = tokenizer.encode_traced(full.text[:cut])
    return kept.ids, len(full.text) - len(kept.text)


@pytest.mark.parametrize("text", ["The cat sat on the mat.", "订单成交，订单取消，查询订单。" * 3, "a😀b\u00a0c\u2028d\r\ne " * 5,
                                  "lone \ud800 surrogate and 🐍 snake " * 3, "x" * 200, "  spaces   and\n\nlines  " * 4])
@pytest.mark.parametrize("max_tokens", [1, 3, 7, 16, 64])
def test_the_cut_is_the_same_as_tokenizing_everything(bundle, text, max_tokens):
    prepared = prepare_text(bundle.tokenizer, text, max_tokens)
    ids, truncated = _reference_prepare(bundle.tokenizer, text, max_tokens)
    assert prepared.tokenization.ids == ids
    assert prepared.truncated_chars == truncated
    assert prepared.tokenization.text == clean_text(text)[: len(clean_text(text)) - truncated]


# ---------------------------------------------------------------- stopping long work

def test_a_newer_keystroke_stops_the_running_analysis_at_its_next_stage(qtbot, make_window, bundle, monkeypatch):
    slow = "the first, slow sentence"
    blocker = block_runs_of(monkeypatch, bundle, slow)
    window = make_window("both")   # NumPy is blocked; ONNX (here another counting runner) would run after it
    c = window.controller
    blocker.others["onnx"] = blocker            # "both" runs ONNX first: that run blocks
    blocker.others["numpy"] = numpy_counter = BlockingRunner(NumpyRunner(bundle), [])
    shown = []
    c.sigTraceChanged.connect(lambda trace: shown.append(trace.text if trace else None))
    window.sentence_bar.setText(slow)
    qtbot.waitUntil(blocker.started.is_set, timeout=WAIT_MS)
    window.sentence_bar.setText(ENGLISH)
    blocker.release.set()
    qtbot.waitUntil(lambda: qt_helpers.settled(window, ENGLISH), timeout=WAIT_MS)
    assert blocker.blocked_ids not in numpy_counter.runs, "the superseded run went on to its next stage"
    assert shown == [ENGLISH]


def test_esc_cancels_a_long_analysis_and_keeps_the_last_result(qtbot, window, bundle, monkeypatch):
    type_text(qtbot, window, ENGLISH)
    shown_before = window.controller.trace
    slow = "a sentence that takes forever"
    blocker = block_runs_of(monkeypatch, bundle, slow)
    window.sentence_bar.setText(slow)
    qtbot.waitUntil(blocker.started.is_set, timeout=WAIT_MS)
    qtbot.waitUntil(window.cancel_button.isEnabled, timeout=WAIT_MS)
    QTest.keyClick(window.sentence_bar, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not window.controller.busy() and not window.cancel_button.isEnabled(), timeout=WAIT_MS)
    assert "cancelled" in window.notice.text()
    blocker.release.set()
    qtbot.waitUntil(lambda: not window.controller._jobs, timeout=WAIT_MS)   # the worker reported the stop
    assert window.controller.trace is shown_before
    type_text(qtbot, window, "typing again runs again")


def test_closing_returns_while_a_job_is_blocked_and_the_thread_still_ends(qtbot, make_window, bundle, monkeypatch):
    slow = "closing while this runs"
    blocker = block_runs_of(monkeypatch, bundle, slow)
    window = make_window()
    delivered = []
    window.controller.sigTraceChanged.connect(delivered.append)
    window.controller.sigError.connect(delivered.append)
    # If close() waited on the job, this releases it so the test fails instead of hanging.
    watchdog = threading.Timer(60, blocker.release.set)
    watchdog.start()
    try:
        window.sentence_bar.setText(slow)
        qtbot.waitUntil(blocker.started.is_set, timeout=WAIT_MS)
        window.close()
        assert not blocker.release.is_set(), "close() waited for the blocked job"
        assert window.controller.is_running(), "the blocked stage is still running, detached"
    finally:
        blocker.release.set()
        watchdog.cancel()
    qtbot.waitUntil(lambda: not window.controller.is_running(), timeout=WAIT_MS)
    qtbot.wait(50)
    assert delivered == [], "a job posted a result after the window closed"


def test_closing_while_idle_joins_the_worker(qtbot, make_window):
    window = make_window()
    type_text(qtbot, window, ENGLISH)
    window.close()
    assert not window.controller.is_running()


# ---------------------------------------------------------------- a bundle or backend that cannot run

def _bundle_without_intervention_inputs(source, folder):
    """A bundle that loads (checker happy, outputs all there) but that the ONNX runner cannot feed."""
    shutil.copytree(source, folder)
    model = onnx.load(str(folder / "model.onnx"))
    keep = [i for i in model.graph.input if i.name not in ("head_mask", "expert_override")]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    onnx.save(model, str(folder / "model.onnx"))
    return folder


def test_a_bundle_that_loads_but_cannot_run_keeps_the_old_model(qtbot, make_window, bundle, tmp_path):
    window = make_window("onnx")
    type_text(qtbot, window, ENGLISH)
    before = window.controller.trace
    broken = _bundle_without_intervention_inputs(bundle.path, tmp_path / "no_inputs")
    window.controller.open_bundle(str(broken))
    qtbot.waitUntil(lambda: window.last_error != "", timeout=WAIT_MS)
    assert window.last_error.startswith(f"could not open the bundle {broken}")
    assert window.controller.bundle is bundle
    assert window.controller.trace is before
    type_text(qtbot, window, "still working with the old model")
    assert window.windowTitle().endswith(f"({bundle.path})")


def test_a_backend_that_cannot_start_keeps_the_old_one(qtbot, window, monkeypatch):
    def no_onnx(bundle):
        raise RuntimeError("Failed to load model: custom op 'Glassbox.Mystery' is not registered")

    # before the first sentence: the head-roles probe would build the (shared) ONNX runner on its worker
    monkeypatch.setattr(controller_module, "OnnxRunner", no_onnx)
    type_text(qtbot, window, ENGLISH)
    window.set_backend("onnx")
    qtbot.waitUntil(lambda: window.last_error != "", timeout=WAIT_MS)
    assert "could not switch to ONNX Runtime" in window.last_error and "custom op" in window.last_error
    assert window.controller.backend == "numpy"
    qtbot.waitUntil(lambda: window.backend_actions["numpy"].isChecked(), timeout=WAIT_MS)
    window.last_error = ""
    type_text(qtbot, window, "the NumPy reference still answers")
    assert window.last_error == "" and window.controller.trace.backend == "numpy"


def test_a_run_whose_outputs_have_the_wrong_shape_is_refused(qtbot, window, bundle, monkeypatch):
    from dataclasses import replace

    class Truncating(NumpyRunner):
        def run(self, ids, **kwargs):
            trace = super().run(ids, **kwargs)
            return replace(trace, logits=trace.logits[:, :128])   # as a graph exported with the wrong vocab

    monkeypatch.setattr(controller_module, "NumpyRunner", Truncating)
    window.sentence_bar.setText(ENGLISH)
    qtbot.waitUntil(lambda: window.last_error != "", timeout=WAIT_MS)
    assert window.last_error.startswith("logits: shape")
    assert window.controller.trace is None


def test_switching_back_before_a_switch_is_ready_keeps_the_backend_in_use(qtbot, window):
    type_text(qtbot, window, ENGLISH)
    window.set_backend("onnx")
    window.set_backend("numpy")
    type_text(qtbot, window, "typed after both switches")
    assert window.controller.backend == "numpy" and window.controller.trace.backend == "numpy"
    assert window.backend_actions["numpy"].isChecked()


def test_a_bundle_opened_after_an_append_reads_the_text_not_the_old_ids(qtbot, window, make_bundle):
    other = make_bundle(seed=3)
    c = window.controller
    type_text(qtbot, window, ENGLISH)
    window.panel("tokens").sigAppendTokens.emit([int(np.argmax(c.trace.logits[-1]))])
    qtbot.waitUntil(lambda: c.trace.text != ENGLISH and not c.busy(), timeout=WAIT_MS)
    text = c.trace.text
    c.open_bundle(str(other.path))
    qtbot.waitUntil(lambda: c.bundle.path == other.path and not c.busy(), timeout=WAIT_MS)
    assert c.trace.input_ids.tolist() == other.tokenizer.encode(text)
    assert np.allclose(c.trace.logits, NumpyRunner(other).run(other.tokenizer.encode(text)).logits, atol=1e-5)


# ---------------------------------------------------------------- a run's tokens show while the model runs

def test_the_tokens_of_a_long_run_show_while_the_model_runs_and_are_not_drawn_again(qtbot, window, bundle,
                                                                                     monkeypatch):
    type_text(qtbot, window, ENGLISH)
    tokens, attention = window.panel("tokens"), window.panel("attention")
    slow = "a sentence the model takes long over"
    blocker = block_runs_of(monkeypatch, bundle, slow)
    chip_sets, draws = [], []
    monkeypatch.setattr(tokens.chips, "set_chips", lambda chips, *a: chip_sets.append(len(chips)))
    draw = tokens.draw
    monkeypatch.setattr(tokens, "draw", lambda: (draws.append(tokens.trace), draw()))
    window.sentence_bar.setText(slow)
    qtbot.waitUntil(blocker.started.is_set, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: tokens.trace is not None and tokens.trace.text == slow and not tokens.has_posted(),
                    timeout=WAIT_MS)
    assert chip_sets == [len(blocker.blocked_ids)]   # the new sentence's chips, while the model still runs
    assert tokens.trace.fields == frozenset() and tokens.trace.tokens == tuple(
        bundle.tokenizer.display_piece(bundle.tokenizer.id_to_piece(i)) for i in blocker.blocked_ids)
    assert attention.trace.text == ENGLISH and window.controller.trace.text == ENGLISH   # the rest waits for the run
    blocker.release.set()
    qtbot.waitUntil(lambda: qt_helpers.settled(window, slow), timeout=WAIT_MS)
    assert tokens.trace is window.controller.trace and attention.trace is window.controller.trace
    assert chip_sets == [len(blocker.blocked_ids)] and len(draws) == 1   # the same tokens: not drawn again


def test_a_cancelled_run_puts_back_the_tokens_of_the_sentence_shown(qtbot, window, bundle, monkeypatch):
    type_text(qtbot, window, ENGLISH)
    shown = window.controller.trace
    tokens = window.panel("tokens")
    slow = "a sentence that is cancelled"
    blocker = block_runs_of(monkeypatch, bundle, slow)
    window.sentence_bar.setText(slow)
    qtbot.waitUntil(blocker.started.is_set, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: tokens.trace is not None and tokens.trace.text == slow, timeout=WAIT_MS)
    QTest.keyClick(window.sentence_bar, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: tokens.trace is shown and not tokens.has_posted(), timeout=WAIT_MS)
    assert tokens.chips.chip_count() == shown.n_tokens
    blocker.release.set()


def test_a_failed_run_puts_back_the_tokens_of_the_sentence_shown(qtbot, window, bundle, monkeypatch):
    type_text(qtbot, window, ENGLISH)
    shown = window.controller.trace
    tokens = window.panel("tokens")
    failing = "a sentence whose run fails"
    ids = bundle.tokenizer.encode(failing)

    class Failing(NumpyRunner):
        def run(self, run_ids, **kwargs):
            if [int(i) for i in run_ids] == ids:
                raise ValueError("the model could not run this")
            return super().run(run_ids, **kwargs)

    monkeypatch.setattr(controller_module.Runners, "get", lambda self, name: Failing(self.bundle))
    seen = []
    window.controller.sigTokensChanged.connect(lambda trace, _selection: seen.append(trace))
    window.sentence_bar.setText(failing)
    qtbot.waitUntil(lambda: "could not run" in window.notice.text() or len(seen) >= 2, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: len(seen) == 2 and not tokens.has_posted(), timeout=WAIT_MS)
    assert seen[0].text == failing and seen[1] is shown   # its tokens, then the sentence shown again
    assert tokens.trace is shown and tokens.chips.chip_count() == shown.n_tokens


def show_tokens_of_blocked_run(qtbot, window, bundle, monkeypatch, text: str):
    """Type `text`, whose run blocks; returns (the Tokens panel, once it shows `text`'s tokens, the blocker)."""
    tokens = window.panel("tokens")
    blocker = block_runs_of(monkeypatch, bundle, text)
    window.sentence_bar.setText(text)
    qtbot.waitUntil(blocker.started.is_set, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: tokens.trace is not None and tokens.trace.text == text and not tokens.has_posted(),
                    timeout=WAIT_MS)
    return tokens, blocker


def test_a_backend_switched_and_back_during_a_run_analyses_the_sentence(qtbot, window, bundle, monkeypatch):
    """The switch superseded the run whose tokens are shown; switching back runs the sentence again."""
    type_text(qtbot, window, ENGLISH)
    slow = "a sentence the model takes long over"
    tokens, blocker = show_tokens_of_blocked_run(qtbot, window, bundle, monkeypatch, slow)
    c = window.controller
    c.set_backend("onnx")
    c.set_backend("numpy")   # back before the switch finished
    blocker.release.set()
    qtbot.waitUntil(lambda: qt_helpers.settled(window, slow), timeout=WAIT_MS)
    assert tokens.trace is c.trace and window.panel("attention").trace is c.trace


def test_a_tokens_panel_hidden_during_a_cancelled_run_shows_the_sentence_shown(qtbot, window, bundle, monkeypatch):
    type_text(qtbot, window, ENGLISH)
    shown = window.controller.trace
    tokens, blocker = show_tokens_of_blocked_run(qtbot, window, bundle, monkeypatch, "a sentence that is cancelled")
    window.docks["tokens"].hide()
    QTest.keyClick(window.sentence_bar, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not window.controller.busy(), timeout=WAIT_MS)
    window.docks["tokens"].show()
    qtbot.waitUntil(lambda: tokens.trace is shown and not tokens.has_posted(), timeout=WAIT_MS)
    blocker.release.set()


def test_a_chip_clicked_while_the_model_runs_stays_selected_in_its_result(qtbot, window, bundle, monkeypatch):
    type_text(qtbot, window, "The cat.")   # shorter than the chip clicked next
    slow = "The cat sat on the mat because it was tired and slept all day long."
    tokens, blocker = show_tokens_of_blocked_run(qtbot, window, bundle, monkeypatch, slow)
    clicked = tokens.trace.n_tokens - 3
    assert clicked >= window.controller.trace.n_tokens
    tokens.chips.sigClicked.emit(clicked)
    qtbot.waitUntil(lambda: not tokens.has_posted() and tokens.selection.query == clicked, timeout=WAIT_MS)
    assert tokens.chips._marked == clicked   # marked on the new sentence's chips at once
    attention = window.panel("attention")
    window.flush_redraws()
    assert attention.selection.query_index(attention.trace.n_tokens) < attention.trace.n_tokens   # fits its trace
    blocker.release.set()
    qtbot.waitUntil(lambda: qt_helpers.settled(window, slow), timeout=WAIT_MS)
    assert window.controller.selection.query == clicked and tokens.chips._marked == clicked


def test_a_generate_that_fails_during_a_run_puts_back_the_sentence_shown(qtbot, window, bundle, monkeypatch):
    from core.sampling import SamplingSettings

    type_text(qtbot, window, ENGLISH)
    c, tokens = window.controller, window.panel("tokens")
    appended = c.trace.input_ids.tolist() + [5]
    blocker = BlockingRunner(NumpyRunner(bundle), appended)
    monkeypatch.setattr(controller_module.Runners, "get", lambda self, name: blocker)

    def broken(*args, **kwargs):
        raise RuntimeError("sampling broke")

    monkeypatch.setattr(controller_module, "generate_ids", broken)
    c.append_tokens([5])
    qtbot.waitUntil(blocker.started.is_set, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: tokens.trace is not None and tokens.trace.n_tokens == len(appended)
                    and not tokens.has_posted(), timeout=WAIT_MS)
    c.generate((3, SamplingSettings()))   # supersedes the append's run, then fails
    blocker.release.set()
    qtbot.waitUntil(lambda: not c.busy() and tokens.trace is c.trace and not tokens.has_posted(), timeout=WAIT_MS)
