"""Fixtures every test shares: random bundles built by the project's own code; Qt offscreen.

Qt-only fixtures live in tests/gui/conftest.py, Qt helpers in tests/gui/qt_helpers.py.
"""
from __future__ import annotations

import os
import sys
from dataclasses import replace

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# pytest-qt makes its own QApplication: it paints as the app's does (gui.app.keep_fills_on_the_painting_thread)
os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")

import pytest  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402

from core.bundle import load_bundle  # noqa: E402
from core.random_bundle import SMALL, make_random_bundle  # noqa: E402
from core.sample_text import sample_sentences  # noqa: E402
from core.tokenizer import BPETokenizer  # noqa: E402

# The property tests that name no settings of their own: as many examples as named here, whatever a
# hypothesis release defaults to, and no per-example deadline (on a loaded 2-core machine a 200 ms one
# fails a correct example now and then; a slow property shows in --durations instead).
hypothesis_settings.register_profile("glassbox", max_examples=100, deadline=None)
hypothesis_settings.load_profile("glassbox")


@pytest.fixture(scope="session", autouse=True)
def _cache_of_this_run(tmp_path_factory):
    """What the tests' bundles leave in the cache (core.validation_cache) stays in this run's folder, not ~/.cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg_cache")))
        yield


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
