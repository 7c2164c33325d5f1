"""Shared fixtures: random bundles built by the project's own code, and Qt offscreen."""
from __future__ import annotations

import os
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
