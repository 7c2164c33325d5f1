"""File → Save / Open / Open recent session: reopening shows the same view with bit-identical numbers; a
missing bundle opens on the shipped model with a message; a damaged file changes nothing."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from core.bundle import DEFAULT_BUNDLE
from core.interventions import Interventions
from core.session_file import FORMAT, SCHEMA_VERSION
from tests.gui.qt_helpers import type_text

WAIT_MS = 30000
SENTENCE = "The cat sat on the mat."


def save(qtbot, window, path):
    window.session_actions.save_to(path)
    qtbot.waitUntil(lambda: path.exists() and not window.controller.busy()
                    and str(path.resolve()) in window.session_actions.recent(), timeout=WAIT_MS)


def open_and_wait(qtbot, window, path, done):
    window.session_actions.open_path(path)
    qtbot.waitUntil(lambda: done() and not window.controller.busy(), timeout=WAIT_MS)


def write_session(path, **keys):
    path.write_text(json.dumps({"format": FORMAT, "version": SCHEMA_VERSION, "sentences": [SENTENCE], **keys}),
                    encoding="utf-8")
    return path


def arrays(trace) -> dict:
    return trace.to_arrays()


def dock_places(window) -> dict:
    return {name: (dock.isHidden(), dock.isFloating(), window.dockWidgetArea(dock)) for name, dock in window.docks.items()}


def test_save_then_open_in_a_fresh_window_gives_the_identical_trace_and_view(qtbot, make_window, tmp_path):
    first = make_window("numpy")
    type_text(qtbot, first, SENTENCE)
    c = first.controller
    c.append_tokens([int(c.trace.logits[-1].argmax())])   # ids that the text need not tokenize back to
    qtbot.waitUntil(lambda: c.state.ids is not None and c.trace.n_tokens == len(c.state.ids) and not c.busy(),
                    timeout=WAIT_MS)
    mask = np.ones((c.trace.num_layers, c.trace.num_heads), np.float32)
    mask[0, 1] = 0.0
    c.set_interventions(Interventions(head_mask=mask, ablate_mode="mean"))
    qtbot.waitUntil(lambda: c.trace.interventions is not None and c.trace.head_mask[0, 1] == 0 and not c.busy(),
                    timeout=WAIT_MS)
    c.select({"layer": 1, "head": 2, "query": 4, "key": 1})
    next_token = first.panel("next_token")
    next_token.temperature.setValue(0.7)
    next_token.top_k.setValue(5)
    next_token.seed.setValue(1234)
    first.panel("patching").corrupt_edit.setText("The dog sat on the mat.")
    first.docks["moe"].close()
    path = tmp_path / "view.glassbox"
    save(qtbot, first, path)

    fresh = make_window("onnx")
    open_and_wait(qtbot, fresh, path, lambda: fresh.controller.trace is not None)
    before, after = arrays(c.trace), arrays(fresh.controller.trace)
    assert set(before) == set(after)
    for name, array in before.items():
        assert array.dtype == after[name].dtype and np.array_equal(array, after[name]), name
    assert fresh.controller.backend == "numpy" and fresh.backend_actions["numpy"].isChecked()
    assert fresh.controller.state == c.state
    assert fresh.sentence_bar.text() == first.sentence_bar.text()
    assert fresh.controller.selection == c.selection
    assert fresh.controller.interventions.ablate_mode == "mean"
    assert np.array_equal(fresh.controller.interventions.head_mask, mask)
    assert fresh.panel("next_token").settings() == next_token.settings()
    assert fresh.panel("patching").corrupt_edit.text() == "The dog sat on the mat."
    assert fresh.docks["moe"].isHidden() and not fresh.docks["attention"].isHidden()


def test_the_merge_step_is_saved_and_restored(qtbot, make_window, tmp_path):
    first = make_window("numpy")
    type_text(qtbot, first, SENTENCE)
    tokens = first.panel("tokens")
    tokens.slider.setValue(2)
    path = tmp_path / "step.glassbox"
    save(qtbot, first, path)
    assert json.loads(path.read_text(encoding="utf-8"))["selection"]["step"] == 2
    fresh = make_window("numpy")
    open_and_wait(qtbot, fresh, path, lambda: fresh.controller.trace is not None)
    assert fresh.panel("tokens").slider.value() == 2


def test_a_session_naming_another_bundle_loads_it_on_the_worker(qtbot, monkeypatch, make_window, make_bundle,
                                                                tmp_path):
    import gui.session_actions as session_actions

    other = make_bundle(seed=5)
    threads = []
    real_load = session_actions.load_bundle

    def recorded(folder):
        threads.append(threading.current_thread())
        return real_load(folder)

    monkeypatch.setattr(session_actions, "load_bundle", recorded)
    window = make_window("numpy")
    type_text(qtbot, window, "Hello")
    path = write_session(tmp_path / "other.glassbox", bundle=str(other.path), backend="numpy")
    open_and_wait(qtbot, window, path, lambda: window.controller.bundle.path == other.path)
    assert threads and all(t is not threading.main_thread() for t in threads)
    assert window.controller.trace.text == SENTENCE
    assert str(other.path) in window.windowTitle()


def test_a_missing_bundle_opens_on_the_shipped_model_with_a_message(qtbot, make_window, tmp_path):
    window = make_window("numpy")
    missing = tmp_path / "gone" / "model"
    path = write_session(tmp_path / "missing.glassbox", bundle=str(missing), backend="numpy")
    open_and_wait(qtbot, window, path, lambda: window.controller.bundle.path.resolve() == DEFAULT_BUNDLE.resolve())
    assert str(missing) in window.last_error and "default model" in window.last_error
    assert window.controller.trace.text == SENTENCE


DAMAGED = {
    "not JSON": b"{\"format\": \"glassbox-session\", \"version\": 1, \"sentences\": [\"a\"",
    "not a session": json.dumps({"hello": 1}).encode(),
    "a key of the wrong kind": json.dumps({"format": FORMAT, "version": 1, "sentences": ["a"],
                                           "selection": {"layer": "one"}}).encode(),
    "interventions of another model's shape": json.dumps({"format": FORMAT, "version": 1, "sentences": ["a"],
                                                          "interventions": {"head_mask": [[0.0]]}}).encode(),
    "a ragged intervention": json.dumps({"format": FORMAT, "version": 1, "sentences": ["a"],
                                         "interventions": {"head_mask": [[0.0], [1.0, 1.0]]}}).encode(),
    "token ids past the vocabulary": json.dumps({"format": FORMAT, "version": 1, "sentences": ["a"],
                                                 "token_ids": [10 ** 9]}).encode(),
    "binary junk": bytes(range(256)),
}


@pytest.mark.parametrize("name", DAMAGED)
def test_a_damaged_file_gives_one_message_and_changes_nothing(qtbot, make_window, tmp_path, name):
    window = make_window("numpy")
    type_text(qtbot, window, SENTENCE)
    c = window.controller
    c.select({"layer": 1, "head": 1})
    trace, bundle, selection, layout = c.trace, c.bundle, c.selection, dock_places(window)
    path = tmp_path / "damaged.glassbox"
    path.write_bytes(DAMAGED[name])
    window.session_actions.open_path(path)
    qtbot.waitUntil(lambda: "nothing was changed" in window.last_error, timeout=WAIT_MS)
    assert "damaged.glassbox" in window.last_error and "\n" not in window.last_error
    assert c.trace is trace and c.bundle is bundle and c.selection == selection
    assert window.sentence_bar.text() == SENTENCE and dock_places(window) == layout
    assert str(path.resolve()) not in window.session_actions.recent()


def test_a_bundle_folder_that_does_not_load_changes_nothing(qtbot, make_window, tmp_path):
    window = make_window("numpy")
    type_text(qtbot, window, SENTENCE)
    trace = window.controller.trace
    (tmp_path / "not_a_model").mkdir()
    path = write_session(tmp_path / "bad_model.glassbox", bundle=str(tmp_path / "not_a_model"))
    window.session_actions.open_path(path)
    qtbot.waitUntil(lambda: "nothing was changed" in window.last_error, timeout=WAIT_MS)
    assert "not_a_model" in window.last_error
    assert window.controller.trace is trace


def test_unknown_future_keys_are_ignored(qtbot, make_window, tmp_path):
    window = make_window("numpy")
    path = write_session(tmp_path / "future.glassbox", version=7, backend="numpy", comparisons={"x": [1, 2]},
                         selection={"layer": 1, "head": 0, "lens_target": 5},
                         sampling={"seed": 42, "min_p": 0.1}, interventions={"neuron_mask": [[1.0]]})
    open_and_wait(qtbot, window, path, lambda: window.controller.trace is not None)
    assert window.controller.trace.text == SENTENCE and window.controller.selection.layer == 1
    assert window.panel("next_token").seed.value() == 42
    assert window.last_error == ""


def test_the_recent_list_keeps_the_last_eight_newest_first_and_drops_missing_files(qtbot, make_window, tmp_path):
    window = make_window("numpy")
    type_text(qtbot, window, "Hi")
    paths = [tmp_path / f"s{i}.glassbox" for i in range(10)]
    for path in paths:
        save(qtbot, window, path)
    recent = window.session_actions.recent()
    assert recent == [str(p.resolve()) for p in reversed(paths)][:8]
    entries = [a.text() for a in window.session_actions.recent_menu.actions() if a.text()]
    assert entries[0].startswith("&1 s9.glassbox") and len([e for e in entries if e.startswith("&")]) == 8

    paths[9].unlink()
    window.session_actions.open_recent(recent[0])
    assert "no longer there" in window.last_error
    assert window.session_actions.recent() == recent[1:]
    second = make_window("numpy")   # the list lives in the settings: another window sees it
    assert second.session_actions.recent() == recent[1:]


def test_saving_where_nothing_can_be_written_says_so(qtbot, make_window, tmp_path):
    window = make_window("numpy")
    type_text(qtbot, window, "Hi")
    (tmp_path / "a_file").write_text("x")
    path = tmp_path / "a_file" / "s.glassbox"   # a folder that is a file: unwritable even for root
    window.session_actions.save_to(path)
    qtbot.waitUntil(lambda: "could not save the session" in window.last_error, timeout=WAIT_MS)
    assert "s.glassbox" in window.last_error and "\n" not in window.last_error
    assert window.session_actions.recent() == []


def test_the_file_menu_offers_the_session_entries_before_the_others(make_window):
    window = make_window("numpy")
    file_menu = window.menuBar().actions()[0].menu()
    texts = [a.text().replace("&", "") for a in file_menu.actions() if not a.isSeparator()]
    assert texts[:4] == ["Open session…", "Open recent session", "Save session…", "Open bundle…"]
    shortcuts = {a.text().replace("&", ""): a.shortcut().toString() for a in file_menu.actions()}
    assert shortcuts["Open session…"] == "Ctrl+O" and shortcuts["Save session…"] == "Ctrl+S"
    assert len({s for s in shortcuts.values() if s}) == len([s for s in shortcuts.values() if s])   # no clashes
