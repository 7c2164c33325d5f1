"""File → Open session…, Open recent session and Save session…: what the window shows, in a .glassbox file.

A session (core.session_file) holds sentence A and the Patching panel's sentence B, the bundle and
backend, the shared selection and the Tokens panel's merge step, the Next-token panel's sampling
settings and seed, the interventions in force, and the dock layout. Opening reads the file on the
model worker and there, if it names another bundle, loads that bundle, builds the backend's runners
and runs sentence A with the interventions: only once all of that has worked does the window change,
so a damaged file, or a model that does not load, changes nothing. A bundle folder that is gone opens
on the shipped model, with a message. Writing goes through the worker too, atomically.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from PySide6.QtCore import QByteArray, QObject
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu

from core.bundle import DEFAULT_BUNDLE, load_bundle
from core.interventions import Interventions
from core.session import Checkpoint, no_checkpoint
from core.session_file import (SUFFIX, Session, SessionError, interventions_from_json, interventions_to_json,
                               load_session, save_session)
from gui.controller import Cancelled, RunResult, Runners, SentenceState, first_run, run_with_backend
from gui.selection import Selection

RECENT_KEY = "sessions/recent"   # a JSON list: an ini file turns a one-item QSettings list into a string
MAX_RECENT = 8
FILE_FILTER = f"Glassbox sessions (*{SUFFIX})"


# ---------------------------------------------------------------- on the worker: read, load, run

@dataclass(frozen=True)
class ReopenedSession:
    session: Session
    runners: Runners               # the session's bundle (the loaded one when it names the same folder)
    state: SentenceState
    interventions: Interventions
    result: RunResult | None       # sentence A run with the interventions; None for an empty sentence
    notice: str = ""               # the bundle named is missing: opened on the shipped model


def _same_folder(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def bundle_entry(folder: Path) -> str | None:
    """What a session records for a bundle folder: None for the shipped model (wherever it is installed)."""
    return None if _same_folder(folder, DEFAULT_BUNDLE) else str(folder.resolve())


def _runners_for(folder: Path, current: Runners) -> Runners:
    return current if _same_folder(folder, current.bundle.path) else Runners(load_bundle(folder))


def reopen(path: str, current: Runners, *, checkpoint: Checkpoint = no_checkpoint) -> ReopenedSession:
    """Everything a session needs before it may replace what is shown; SessionError (one line) if it cannot."""
    opened = load_session(path)
    session, name = opened.session, Path(path).name
    folder = Path(session.bundle) if session.bundle is not None else DEFAULT_BUNDLE
    try:
        interventions = interventions_from_json(session.interventions)
    except ValueError as exc:
        raise SessionError(f"{name}: not a usable Glassbox session ({exc})") from None
    state = SentenceState(session.sentences[0], session.token_ids)
    try:
        runners = _runners_for(folder, current)
        checkpoint()
        if state.text or state.ids is not None:
            result = run_with_backend(runners, session.backend, state, checkpoint=checkpoint,
                                      interventions=interventions)
        else:
            first_run(runners, session.backend, state, checkpoint)   # the model and backend work: nothing to show
            result = None
    except (Cancelled, SessionError):
        raise
    except Exception as exc:   # the model does not load, or the sentence and interventions do not fit it
        raise SessionError(f"{name}: cannot open it with the model {folder}: {str(exc).splitlines()[0]}") from None
    return ReopenedSession(session, runners, state, interventions, result, opened.message)


# ---------------------------------------------------------------- the window's side

def capture_session(window, state_version: int) -> Session:
    """What the window shows now, as a Session (read on the UI thread: widgets and the controller's state)."""
    c, sel = window.controller, window.controller.selection
    patching, tokens, next_token = window.panel("patching"), window.panel("tokens"), window.panel("next_token")
    sentence_b = patching.corrupt_edit.text() if patching is not None else ""
    step = None
    if tokens is not None and tokens.replay is not None and tokens.slider.value() != tokens.slider.maximum():
        step = tokens.slider.value()
    state = c.state
    layout = base64.b64encode(bytes(window.saveState(state_version))).decode("ascii")
    return Session(sentences=(state.text, sentence_b) if sentence_b else (state.text,),
                   token_ids=state.ids, bundle=bundle_entry(c.bundle.path), backend=c.backend,
                   selection={"layer": sel.layer, "head": sel.head, "query": sel.query, "key": sel.key, "step": step},
                   sampling=next_token.settings() if next_token is not None else Session().sampling,
                   interventions=interventions_to_json(c.interventions), dock_layout=layout)


def _apply_panels(window, session: Session) -> None:
    """The panels' own settings: sentence B, sampling and seed, the merge step (once Tokens shows the trace)."""
    patching, tokens, next_token = window.panel("patching"), window.panel("tokens"), window.panel("next_token")
    if patching is not None:
        patching.corrupt_edit.setText(session.sentences[1] if len(session.sentences) > 1 else "")
    if next_token is not None:
        s = session.sampling
        next_token.temperature.setValue(s.temperature)
        next_token.top_k.setValue(s.top_k)
        next_token.top_p.setValue(s.top_p)
        (next_token.greedy if s.greedy else next_token.sampled).setChecked(True)
        next_token.seed.setValue(s.seed)
    step = session.selection.get("step")
    if tokens is not None and step is not None and tokens.trace is window.controller.trace:
        tokens.slider.setValue(step)


def _apply_layout(window, layout: str, state_version: int) -> None:
    if layout:   # a layout of another dock set (another version) is refused by Qt: the current one stays
        window.restoreState(QByteArray(base64.b64decode(layout)), state_version)


class SessionActions(QObject):
    """The File menu's session entries, the recent list (QSettings) and the two worker jobs behind them."""

    def __init__(self, window, file_menu: QMenu, state_version: int) -> None:
        """Adds its entries at the end of file_menu (the window calls it first, so they come first)."""
        super().__init__(window)
        self.window, self.state_version = window, state_version
        self._opening = 0    # the newest Open: an older one still loading is dropped
        self.open_action = self._action(file_menu, "Open &session…", self.choose_open, QKeySequence("Ctrl+O"))
        self.recent_menu = file_menu.addMenu("Open &recent session")
        self.save_action = self._action(file_menu, "&Save session…", self.choose_save, QKeySequence("Ctrl+S"))
        file_menu.addSeparator()
        self._fill_recent_menu()

    @staticmethod
    def _action(menu: QMenu, text: str, slot, shortcut: QKeySequence) -> QAction:
        action = menu.addAction(text)
        action.setShortcut(shortcut)
        action.triggered.connect(lambda _=False: slot())
        return action

    # ------------------------------------------------------------ dialogs
    def _folder(self) -> str:
        recent = self.recent()
        return str(Path(recent[0]).parent) if recent else str(Path.home())

    def choose_save(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self.window, "Save the session", self._folder(), FILE_FILTER)
        if path:
            self.save_to(path if path.endswith(SUFFIX) else path + SUFFIX)

    def choose_open(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Open a session", self._folder(), FILE_FILTER)
        if path:
            self.open_path(path)

    # ------------------------------------------------------------ saving
    def save_to(self, path: str | Path) -> None:
        """Capture the view now; write it on the worker (atomically: a failed save leaves the old file)."""
        session, path = capture_session(self.window, self.state_version), Path(path)
        self.window.controller.run_on_worker(lambda checkpoint: save_session(session, path),
                                             partial(self._saved, path),
                                             lambda message: self.window.show_error(
                                                 f"could not save the session: {message}"),
                                             detachable=False)

    def _saved(self, path: Path, _written) -> None:
        self.remember(path)
        self.window.statusBar().showMessage(f"saved the session to {path}", 8000)

    # ------------------------------------------------------------ opening
    def open_path(self, path: str | Path) -> None:
        """Read, load and run on the worker; then show it all at once, or say why not and change nothing."""
        self._opening += 1
        number, path, controller = self._opening, Path(path), self.window.controller
        self.window.statusBar().showMessage(f"opening the session {path}…")
        controller.run_on_worker(partial(reopen, str(path), controller.runners), partial(self._reopened, number, path),
                                 partial(self._failed, number, path), lambda: number != self._opening)

    def _failed(self, number: int, path: Path, message: str) -> None:
        if number == self._opening:
            self.window.statusBar().clearMessage()
            self.window.show_error(f"{message} — nothing was changed")

    def _reopened(self, number: int, path: Path, reopened: ReopenedSession) -> None:
        if number != self._opening:
            return
        window, session = self.window, reopened.session
        selection = Selection(**{k: session.selection[k] for k in ("layer", "head", "query", "key")})
        window.controller.restore_session(reopened.runners, session.backend, reopened.state,
                                          reopened.interventions, reopened.result, selection)
        _apply_layout(window, session.dock_layout, self.state_version)   # docks it shows draw the new trace
        window.flush_redraws()   # drawn now, not at the next frame: the merge step applies to the trace shown
        _apply_panels(window, session)
        self.remember(path)
        window.statusBar().showMessage(f"opened the session {path}", 8000)
        if reopened.notice:
            window.show_error(reopened.notice)

    # ------------------------------------------------------------ the recent list
    def recent(self) -> list[str]:
        try:
            paths = json.loads(str(self.window.settings.value(RECENT_KEY, "[]")))
        except ValueError:
            return []
        return [p for p in paths if isinstance(p, str)][:MAX_RECENT] if isinstance(paths, list) else []

    def _store(self, paths: list[str]) -> None:
        self.window.settings.setValue(RECENT_KEY, json.dumps(paths[:MAX_RECENT], ensure_ascii=False))
        self._fill_recent_menu()

    def remember(self, path: Path) -> None:
        entry = str(path.resolve())
        self._store([entry] + [p for p in self.recent() if p != entry])

    def open_recent(self, path: str) -> None:
        if not Path(path).is_file():
            self._store([p for p in self.recent() if p != path])
            self.window.show_error(f"the session {path} is no longer there; it was removed from the recent list")
            return
        self.open_path(path)

    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        recent = self.recent()
        for i, path in enumerate(recent):
            action = self.recent_menu.addAction(f"&{i + 1} {Path(path).name} — {Path(path).parent}")
            action.setToolTip(path)
            action.triggered.connect(lambda _=False, p=path: self.open_recent(p))
        if not recent:
            self.recent_menu.addAction("(no recent sessions)").setEnabled(False)
        else:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear the list").triggered.connect(lambda _=False: self._store([]))
