"""File → Import model folder… and the offer for a Hugging Face --model: import on a thread, open the bundle."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from core.hf_import import default_cache_root
from gui import import_actions
from gui.app import split_model_argument
from gui.import_actions import CACHE
from tests.core.test_hf_import import LLAMA_CONFIG, _folder_with, make_hf_folder
from tests.gui.qt_helpers import type_text

WAIT_MS = 60000
UNSUPPORTED = [({**LLAMA_CONFIG, "architectures": ["GPT2LMHeadModel"]}, {}, "GPT2LMHeadModel is not supported"),
               (LLAMA_CONFIG, {"pytorch_model.bin": b"\x80\x04not really a pickle"}, "never unpickles"),
               ({**LLAMA_CONFIG, "quantization_config": {"quant_method": "awq"}}, {}, "quantised checkpoint")]


@pytest.fixture()
def cache_home(tmp_path, monkeypatch) -> Path:
    """The import cache of this test alone (the one --import-to-cache uses, under XDG_CACHE_HOME)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return default_cache_root()


@pytest.fixture()
def hf_folder(tmp_path, small_tokenizer) -> Path:
    folder = tmp_path / "Qwen2-tiny"
    make_hf_folder(folder, small_tokenizer, "qwen2-tied", seed=3)
    return folder


def answer_dialogs(monkeypatch, source: Path, destination) -> None:
    monkeypatch.setattr(import_actions.QFileDialog, "getExistingDirectory", lambda *a, **k: str(source))
    monkeypatch.setattr(import_actions, "ask_destination", lambda parent, folder: destination)


def import_action(window):
    return next(a for a in window.menuBar().actions()[0].menu().actions() if a.text() == "&Import model folder…")


def wait_for_bundle(qtbot, window, folder: Path, text: str) -> None:
    c = window.controller
    qtbot.waitUntil(lambda: c.bundle.path == folder and c.trace is not None and c.trace.text == text
                    and not c.busy() and not window.imports.job.is_alive(), timeout=WAIT_MS)


def test_import_menu_imports_into_the_cache_and_shows_the_imported_model(qtbot, make_window, hf_folder, cache_home,
                                                                         monkeypatch):
    window = make_window()
    type_text(qtbot, window, "the cat sat")
    old_bundle = window.controller.bundle
    answer_dialogs(monkeypatch, hf_folder, CACHE)
    import_action(window).trigger()
    assert window.imports.progress.isVisible()   # the dialog is up while the thread works
    qtbot.waitUntil(lambda: cache_home.is_dir() and any(p.name[0] != "." for p in cache_home.iterdir()),
                    timeout=WAIT_MS)
    imported = next(p for p in cache_home.iterdir() if p.name[0] != ".")
    wait_for_bundle(qtbot, window, imported, "the cat sat")
    trace = window.controller.trace
    assert window.controller.bundle is not old_bundle
    assert trace.config.architecture == "Qwen2ForCausalLM" and trace.config.qkv_bias
    window.flush_redraws()   # panels take a trace at the next frame, which need not have come yet
    assert window.panel("tokens").trace is trace   # what the window shows is the imported model's run
    assert "Qwen2ForCausalLM" in (imported / "MODEL_CARD.md").read_text()
    assert not window.imports.progress.isVisible()


def test_importing_the_same_folder_again_reuses_the_cache(qtbot, make_window, hf_folder, cache_home, monkeypatch):
    window = make_window()
    type_text(qtbot, window, "a b")
    answer_dialogs(monkeypatch, hf_folder, CACHE)
    import_action(window).trigger()
    qtbot.waitUntil(lambda: window.controller.bundle.path.parent == cache_home and not window.controller.busy()
                    and not window.imports.job.is_alive(), timeout=WAIT_MS)
    imported = window.controller.bundle.path
    written = {p.name: p.stat().st_mtime_ns for p in imported.iterdir()}
    monkeypatch.setattr("core.hf_import.import_model", lambda *a, **k: pytest.fail("imported a second time"))
    import_action(window).trigger()
    qtbot.waitUntil(lambda: not window.imports.job.is_alive() and not window.controller.busy(), timeout=WAIT_MS)
    assert window.controller.bundle.path == imported
    assert {p.name: p.stat().st_mtime_ns for p in imported.iterdir()} == written
    assert [p.name for p in cache_home.iterdir()] == [imported.name]


def test_import_into_a_chosen_folder(qtbot, make_window, hf_folder, cache_home, tmp_path, monkeypatch):
    window = make_window()
    type_text(qtbot, window, "a b")
    chosen = tmp_path / "bundles"
    (chosen / "other").mkdir(parents=True)   # not empty: the bundle goes into a sub-folder named after the source
    answer_dialogs(monkeypatch, hf_folder, chosen)
    import_action(window).trigger()
    wait_for_bundle(qtbot, window, chosen / hf_folder.name, "a b")
    assert not cache_home.exists()


@pytest.mark.parametrize("config, files, message", UNSUPPORTED, ids=["architecture", "pytorch-bin", "quantised"])
def test_an_unsupported_folder_gives_cores_message_and_keeps_the_model(qtbot, make_window, tmp_path, cache_home,
                                                                         monkeypatch, config, files, message):
    window = make_window()
    type_text(qtbot, window, "the cat sat")
    bundle, trace = window.controller.bundle, window.controller.trace
    answer_dialogs(monkeypatch, _folder_with(tmp_path, config, files), CACHE)
    import_action(window).trigger()
    assert message in window.last_error and "\n" not in window.last_error
    assert window.imports.job is None   # refused before any thread or dialog
    assert window.controller.bundle is bundle and window.controller.trace is trace
    assert not cache_home.exists()


def test_a_weights_file_that_lies_is_refused_by_the_thread_and_the_model_stays(qtbot, make_window, hf_folder,
                                                                               cache_home, monkeypatch):
    (hf_folder / "model.safetensors").write_bytes(b"\xff" * 16)   # a header length past the end of the file
    window = make_window()
    type_text(qtbot, window, "the cat sat")
    bundle = window.controller.bundle
    answer_dialogs(monkeypatch, hf_folder, CACHE)
    import_action(window).trigger()
    qtbot.waitUntil(lambda: not window.imports.job.is_alive() and "could not import" in window.last_error,
                    timeout=WAIT_MS)
    assert "runs past the end of the file" in window.last_error
    assert window.controller.bundle is bundle
    assert [p for p in cache_home.iterdir()] == []   # the staging folder is gone


def test_cancel_stops_the_import_and_leaves_nothing(qtbot, make_window, hf_folder, cache_home, monkeypatch):
    window = make_window()
    type_text(qtbot, window, "the cat sat")
    bundle = window.controller.bundle
    release = threading.Event()
    real = import_actions.cached_import

    def held_back(source, **kwargs):
        release.wait(WAIT_MS / 1000)
        return real(source, **kwargs)

    monkeypatch.setattr(import_actions, "cached_import", held_back)
    answer_dialogs(monkeypatch, hf_folder, CACHE)
    import_action(window).trigger()
    qtbot.mouseClick(window.imports.progress.findChild(QPushButton), Qt.MouseButton.LeftButton)   # Cancel
    release.set()
    qtbot.waitUntil(lambda: not window.imports.job.is_alive(), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: "import cancelled" in window.statusBar().currentMessage(), timeout=WAIT_MS)
    assert window.controller.bundle is bundle
    assert not cache_home.exists() or list(cache_home.iterdir()) == []


def test_closing_the_window_during_an_import_stops_its_thread(qtbot, make_window, hf_folder, cache_home, monkeypatch):
    window = make_window()
    answer_dialogs(monkeypatch, hf_folder, CACHE)
    import_action(window).trigger()
    window.close()
    assert not window.imports.job.is_alive()
    assert not cache_home.exists() or [p for p in cache_home.iterdir() if p.name.startswith(".")] == []


def test_a_hugging_face_model_argument_is_offered_for_import(qtbot, make_window, hf_folder, cache_home, monkeypatch):
    assert split_model_argument(str(hf_folder)) == (None, str(hf_folder))
    window = make_window()
    type_text(qtbot, window, "a b")
    assert split_model_argument(str(window.controller.bundle.path)) == (str(window.controller.bundle.path), None)
    questions = []
    monkeypatch.setattr(import_actions, "confirm_import", lambda parent, q: questions.append(q) or True)
    window.imports.offer_import(hf_folder)
    assert "This is a Hugging Face model folder (Qwen2ForCausalLM). Import it into a Glassbox bundle?" in questions[0]
    qtbot.waitUntil(lambda: window.controller.bundle.path.parent == cache_home and not window.controller.busy()
                    and not window.imports.job.is_alive(), timeout=WAIT_MS)
    assert window.controller.trace.config.architecture == "Qwen2ForCausalLM"


def test_declining_the_offer_keeps_the_model(qtbot, make_window, hf_folder, cache_home, monkeypatch):
    window = make_window()
    bundle = window.controller.bundle
    monkeypatch.setattr(import_actions, "confirm_import", lambda parent, q: False)
    window.imports.offer_import(hf_folder)
    assert window.imports.job is None and window.controller.bundle is bundle and not cache_home.exists()


def test_the_app_takes_a_hugging_face_model_without_the_flag_but_commands_still_need_it(hf_folder, tmp_path,
                                                                                        monkeypatch, capsys):
    import main

    started = []
    monkeypatch.setattr(main, "cmd_gui", lambda args: started.append(args.model) or 0)
    assert main.main(["--model", str(hf_folder)]) == 0
    assert started == [str(hf_folder)]   # not imported by the CLI: the window offers it
    assert main.main(["trace", "--model", str(hf_folder), "--text", "a", "--out", str(tmp_path / "t")]) == 2
    assert "--import-to-cache" in capsys.readouterr().err
