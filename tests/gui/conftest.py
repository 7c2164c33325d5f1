"""Fixtures of the Qt tests: a settings file of the test's own, a shown MainWindow, a shown widget, a
headless figure host."""
from __future__ import annotations

import gc

import pytest


@pytest.fixture(autouse=True)
def collect_garbage_on_the_main_thread(qapp):
    """As the app does (gui.app.collect_garbage_on_this_thread): no automatic collection, which a worker
    thread's allocations could trigger and so destroy a test's dropped widgets off the GUI thread (a
    deadlock in QObject's destructor); what a test dropped is collected here, on the GUI thread."""
    gc.disable()
    yield
    gc.collect()


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
        # A stage that cannot be interrupted (an ORT session being built) may outlast close()'s short
        # wait on a loaded machine; what matters is that the threads do end, and soon.
        qtbot.waitUntil(lambda w=window: not w.controller.is_running(), timeout=10_000)


@pytest.fixture(scope="module")
def host(qapp):
    """A headless FigureHost (the panels `main.py export` draws figures with), one per test file."""
    from gui.headless import FigureHost

    host = FigureHost()
    yield host
    host.close()


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


@pytest.fixture(scope="session")
def shipped():
    """The shipped model's bundle, loaded once."""
    from core.bundle import load_bundle

    return load_bundle(None)


@pytest.fixture(scope="session")
def shipped_onnx(shipped):
    """An ONNX runner of the shipped model, built once (the experiment panels' tests run their jobs on it)."""
    from core.runners import OnnxRunner

    return OnnxRunner(shipped)


@pytest.fixture()
def shipped_window(qtbot, shipped, settings):
    """shipped_window(text, width, height) -> a shown ONNX MainWindow on the shipped model that has analysed
    `text`; closed after, with both worker threads joined."""
    from gui.controller import Controller
    from gui.fonts import register_fonts
    from gui.main_window import MainWindow

    windows = []

    def make(text: str, width: int, height: int):
        register_fonts()
        window = MainWindow(Controller(shipped, "onnx"), settings)
        qtbot.addWidget(window)
        window.resize(width, height)
        window.show()
        qtbot.waitExposed(window)
        window.controller.set_text(text)
        window.controller.flush()
        qtbot.waitUntil(lambda: window.controller.trace is not None, timeout=20000)
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.close()
        assert not window.controller.is_running()
