"""Shared fixtures: random bundles built by the project's own code, and Qt offscreen."""
from __future__ import annotations

import os
import sys
from dataclasses import replace

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from core.bundle import load_bundle  # noqa: E402
from core.random_bundle import SMALL, make_random_bundle  # noqa: E402
from core.sample_text import sample_sentences  # noqa: E402
from core.tokenizer import BPETokenizer  # noqa: E402


@pytest.fixture(scope="session")
def small_tokenizer() -> BPETokenizer:
    return BPETokenizer.train(sample_sentences(300, seed=1), vocab_size=400, min_frequency=1)


@pytest.fixture(scope="session")
def make_bundle(tmp_path_factory, small_tokenizer):
    """make_bundle(**config_overrides) -> a loaded random Bundle of that shape (cached per shape)."""
    cache = {}

    def make(seed: int = 0, **overrides):
        key = (seed, tuple(sorted(overrides.items())))
        if key not in cache:
            config = replace(SMALL, **overrides)
            folder = tmp_path_factory.mktemp("bundle")
            make_random_bundle(folder, config, seed=seed, tokenizer=small_tokenizer)
            cache[key] = load_bundle(folder)
        return cache[key]

    return make


@pytest.fixture(scope="session")
def bundle(make_bundle):
    return make_bundle()


@pytest.fixture(scope="session")
def analysed(bundle):
    """analysed(text) -> the Trace of `text` on the shared random bundle (NumPy runner, cached per text)."""
    from core.runners import NumpyRunner
    from core.session import analyse

    runner, cache = NumpyRunner(bundle), {}

    def analysed_text(text: str):
        if text not in cache:
            cache[text] = analyse(runner, text)
        return cache[text]

    return analysed_text


@pytest.fixture()
def settings(tmp_path):
    """A QSettings file of the test's own: no test reads the user's layout or writes over it."""
    from PySide6.QtCore import QSettings

    return QSettings(str(tmp_path / "glassbox.ini"), QSettings.Format.IniFormat)


@pytest.fixture()
def make_window(qtbot, bundle, settings):
    """make_window(backend="numpy", panel_classes=None) -> a shown MainWindow; closed (worker joined) after."""
    from gui.controller import Controller
    from gui.fonts import register_fonts
    from gui.main_window import MainWindow

    windows = []

    def make(backend: str = "numpy", panel_classes=None) -> MainWindow:
        register_fonts()
        window = MainWindow(Controller(bundle, backend), settings, panel_classes=panel_classes)
        qtbot.addWidget(window)
        window.resize(1400, 900)
        window.show()
        qtbot.waitExposed(window)
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.close()
        assert not window.controller.is_running(), "the worker thread outlived its window"


@pytest.fixture
def show(qtbot):
    """show(widget, width, height) -> widget: the bundled CJK font registered, sized, shown offscreen, exposed."""
    from gui.fonts import register_fonts

    def _show(widget, width: int = 1000, height: int = 700):
        register_fonts()
        qtbot.addWidget(widget)
        widget.resize(width, height)
        widget.show()
        qtbot.waitExposed(widget)
        return widget

    return _show


def settled(window, text: str) -> bool:
    """The window's controller has analysed exactly `text` and has nothing under way."""
    c = window.controller
    return c.trace is not None and c.trace.text == text and not c.busy()


def type_text(qtbot, window, text: str, timeout: int = 20000) -> None:
    window.sentence_bar.setText(text)   # keyClicks cannot type CJK; setText goes through the same signal
    qtbot.waitUntil(lambda: settled(window, text), timeout=timeout)


def hover(widget, pos) -> None:
    """Deliver a mouse move to `widget` at `pos` directly (QTest's mouseMove drops moves now and then offscreen).

    pyqtgraph's scenes ignore a move that comes within 1/mouseRateLimit s (10 ms) of the last one,
    so wait past that first: two quick hovers in a test must both arrive.
    """
    from PySide6.QtCore import QEvent, QPointF, Qt
    from PySide6.QtGui import QMouseEvent
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    QTest.qWait(30)

    local = QPointF(pos)
    event = QMouseEvent(QEvent.Type.MouseMove, local, QPointF(widget.mapToGlobal(local)),
                        Qt.MouseButton.NoButton, Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, event)


# Qt and pyqtgraph objects can be torn down in an order that crashes the interpreter at exit (SIGSEGV)
# after every test has passed and the summary is printed — pyqtgraph's own pg.exit() exists for this.
# Leave with pytest's own exit status instead, so a run is judged by its tests alone.
def pytest_sessionfinish(session, exitstatus) -> None:
    session.config.glassbox_exit_status = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    status = getattr(config, "glassbox_exit_status", None)
    if status is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
