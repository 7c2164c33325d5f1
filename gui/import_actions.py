"""File → Import model folder…, and the offer made when --model names a Hugging Face folder.

A Hugging Face folder (config.json, *.safetensors, tokenizer.json) becomes a bundle on a thread of
its own (a 0.5B model takes tens of seconds), behind a progress dialog whose Cancel stops it at the
next tensor, leaving nothing behind. The bundle goes into the import cache that `--import-to-cache`
uses (reused when the same folder is imported again) or a folder the user picks; then the controller
opens it, off the UI thread like File → Open bundle. The checks and messages are core.hf_import's:
a folder it refuses gets its one line in a message box, and the loaded model stays loaded.
"""
from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QMessageBox, QProgressDialog, QWidget

from core.hf_import import HFImportError, Progress, Share, cached_import, check_folder, import_staged

CACHE = "cache"        # ask_destination's answer for the import cache
PROGRESS_STEPS = 1000  # the progress bar's resolution
JOIN_ON_CLOSE_S = 2.0  # closing the window waits this long for a cancelled import to clean up
THREAD_NAME = "glassbox-import"


class ImportCancelled(Exception):
    """Raised inside the import (from its progress callback) once the user has pressed Cancel."""


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def into_folder(source: Path, chosen: Path, progress: Progress, share: Share) -> Path:
    """Import into the chosen folder if it is empty, else into a new sub-folder named after the source."""
    empty = chosen.is_dir() and not any(chosen.iterdir())
    return import_staged(source, chosen if empty else chosen / source.name, progress, share)


class _Bridge(QObject):
    """Lives on the main thread: the import thread's emits arrive there, queued."""
    sigLine = Signal(str)
    sigShare = Signal(float)
    sigFinished = Signal(object, str)   # (bundle Path, "") | (None, one-line error) | (None, "") when cancelled


class ImportThread:
    """One import on a Python thread; only plain data (floats, strings, a Path) crosses to the UI."""

    def __init__(self, work: Callable[..., Path]) -> None:   # work(progress=..., share=...) -> bundle folder
        self.bridge = _Bridge()
        self._work = work
        self._cancel = threading.Event()
        self._post_lock = threading.Lock()   # nothing is posted once closed (the bridge may be gone)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        self._cancel.set()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def close(self, wait_s: float) -> None:
        """Cancel, post nothing more, and give the import up to wait_s to remove its staging folder."""
        self.cancel()
        with self._post_lock:
            self._closed = True
        self._thread.join(wait_s)

    def _share(self, fraction: float) -> None:
        if self._cancel.is_set():
            raise ImportCancelled
        self._post(self.bridge.sigShare, fraction)

    def _run(self) -> None:
        try:
            path = self._work(progress=lambda line: self._post(self.bridge.sigLine, line), share=self._share)
        except ImportCancelled:
            self._post(self.bridge.sigFinished, None, "")
        except Exception as exc:  # HFImportError, a full disk...: one line in a message box
            self._post(self.bridge.sigFinished, None, one_line(exc))
        else:
            self._post(self.bridge.sigFinished, path, "")

    def _post(self, signal, *args) -> None:
        with self._post_lock:
            if not self._closed:
                signal.emit(*args)


def ask_destination(parent: QWidget, source: Path) -> Path | str | None:
    """CACHE, a chosen folder, or None (cancelled)."""
    box = QMessageBox(QMessageBox.Icon.Question, "Import model folder",
                      f"Import {source.name} into a Glassbox bundle.\n\nThe import cache keeps one bundle per "
                      f"model folder and reuses it next time; or choose a folder of your own.", parent=parent)
    cache = box.addButton("Import into the cache", QMessageBox.ButtonRole.AcceptRole)
    folder = box.addButton("Choose a folder…", QMessageBox.ButtonRole.ActionRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    if box.clickedButton() is cache:
        return CACHE
    if box.clickedButton() is folder:
        chosen = QFileDialog.getExistingDirectory(parent, "Write the bundle into (an empty folder, or a new "
                                                          "sub-folder is made)", str(source.parent))
        return Path(chosen) if chosen else None
    return None


def confirm_import(parent: QWidget, question: str) -> bool:
    box = QMessageBox(QMessageBox.Icon.Question, "Glassbox", question, parent=parent)
    accept = box.addButton("Import", QMessageBox.ButtonRole.AcceptRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    return box.clickedButton() is accept


class ImportActions(QObject):
    """The window's import: the menu action, the --model offer, the progress dialog, the hand-over."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.job: ImportThread | None = None
        self.progress: QProgressDialog | None = None

    def choose_and_import(self) -> None:
        """File → Import model folder…"""
        folder = QFileDialog.getExistingDirectory(self.window, "Import a Hugging Face model folder "
                                                               "(config.json, *.safetensors, tokenizer.json)")
        if not folder or not self._supported(Path(folder)):
            return
        destination = ask_destination(self.window, Path(folder))
        if destination is not None:
            self.start(Path(folder), destination)

    def offer_import(self, folder: str | Path) -> None:
        """The app was started with --model on a Hugging Face folder: ask, then import into the cache."""
        folder = Path(folder)
        config = self._supported(folder)
        if config is None:
            return
        question = (f"{folder}\n\nThis is a Hugging Face model folder ({config.architecture}). "
                    "Import it into a Glassbox bundle?")
        if confirm_import(self.window, question):
            self.start(folder, CACHE)

    def _supported(self, folder: Path):
        """The folder's ModelConfig, or None after showing core's one-line reason."""
        try:
            return check_folder(folder)[1]
        except HFImportError as exc:
            self.window.show_error(str(exc))
            return None

    def start(self, source: Path, destination: Path | str) -> None:
        if self.job is not None and self.job.is_alive():
            self.window.show_error("an import is already running; wait for it or cancel it first")
            return
        if destination == CACHE:
            work = partial(cached_import, source)
        else:
            work = partial(into_folder, source, Path(destination))
        self.job = ImportThread(work)
        self.progress = self._progress_dialog(source)
        self.job.bridge.sigLine.connect(lambda line: self.progress.setLabelText(f"Importing {source.name}:\n{line}"))
        self.job.bridge.sigShare.connect(lambda f: self.progress.setValue(round(f * PROGRESS_STEPS)))
        self.job.bridge.sigFinished.connect(self._finished)
        self.progress.canceled.connect(self._cancel)
        self.job.start()

    def _progress_dialog(self, source: Path) -> QProgressDialog:
        dialog = QProgressDialog(f"Importing {source.name}:\nreading the files", "Cancel", 0, PROGRESS_STEPS,
                                 self.window)
        dialog.setWindowTitle("Import model folder")
        dialog.setWindowModality(Qt.WindowModality.WindowModal)
        dialog.setAutoClose(False)
        dialog.setAutoReset(False)
        dialog.setMinimumDuration(0)
        dialog.setValue(0)
        dialog.show()
        return dialog

    def _cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()
            self.progress.setLabelText("Cancelling…")

    def _finished(self, path: Path | None, message: str) -> None:
        self.progress.canceled.disconnect(self._cancel)
        self.progress.close()
        if path is not None:
            self.window.statusBar().showMessage(f"imported into {path}; opening it", 5000)
            self.window.controller.open_bundle(str(path))
        elif message:
            self.window.show_error(f"could not import the model folder: {message}")
        else:
            self.window.statusBar().showMessage("import cancelled; nothing was written", 5000)

    def shutdown(self) -> None:
        """On close: stop a running import (its staging folder is removed) and post nothing more."""
        if self.job is not None:
            self.job.close(JOIN_ON_CLOSE_S)
