"""Start the desktop app: QApplication, fonts, the bundle to open, the main window."""
from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import sys
import threading
import time
import weakref
from typing import Callable, Iterator

# The app collects garbage on a timer of its own thread (collect_garbage_on_this_thread): automatic
# collection is off from the first import on, not only once the QApplication is made. During start-up's
# imports it ran about 180 times, ~80 ms of the main thread's CPU.
gc.disable()

# The Qt-free modules before Qt: once PySide6 is imported it reads the source of every module imported
# after it (for its __feature__ switch), which cost ~0.1 s of start-up for NumPy, onnx and the model code.
import core.session  # noqa: F401  (the runners, the tokenizer, NumPy and onnx)
from core.bundle import Bundle, BundleError, load_bundle
from core.hf_import import is_hf_folder

from PySide6.QtCore import QObject, QSocketNotifier, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from gui.controller import BACKENDS, Controller
from gui.fonts import register_fonts
from gui.main_window import APPLICATION, ORGANISATION, MainWindow, default_settings
from gui.panels.base import drawing_lately

FIRST_SENTENCE = "订单成交，订单取消。The cat sat on the mat because it was tired."
INTERRUPTED = 130   # the exit status of a program stopped by Ctrl+C (128 + SIGINT)
GC_EVERY_S = 1.0          # how often garbage is looked for (as pyqtgraph's GarbageCollector)
GC_QUIET_S = 0.02         # put off while the panels draw, and this long after: a collection would lengthen the update
GC_PUT_OFF_AT_MOST_S = 5.0   # ... but not longer: typing on and on must not let garbage pile up


def application() -> QApplication:
    keep_fills_on_the_painting_thread()
    app = QApplication.instance() or QApplication(qt_arguments(sys.argv))
    app.setOrganizationName(ORGANISATION)
    app.setApplicationName(APPLICATION)
    register_fonts(app)
    collect_garbage_on_this_thread(app)
    return app


def keep_fills_on_the_painting_thread() -> None:
    """Qt's raster engine hands a fill taller than ~100 lines to a pool of threads and waits for them;
    on this 2-core machine the hand-off costs more than the fill (a Fusion scroll bar painted in 1.1 ms
    instead of 0.09, a full repaint of the window in 5.4-6.6 ms instead of 1.6-1.9). Set before the
    QApplication is made; any value turns the pool off, so a user's own setting keeps it off too."""
    os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")


def qt_arguments(argv: list[str]) -> list[str]:
    """argv as Qt can take it. Python decodes bytes that are not UTF-8 (`--text $'\\xff'`, a Latin-1 file
    name) to lone surrogates, which crash QApplication; Qt only reads its own options, so U+FFFD serves."""
    return [arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for arg in argv]


def collect_garbage_on_this_thread(app: QApplication) -> None:
    """Python's cycle collector runs on whichever thread allocates when a threshold is crossed: on a
    model worker it would destroy a discarded widget off the GUI thread, which deadlocks or crashes Qt.
    Automatic collection is off (above); a timer of this thread collects instead (IdleCollector)."""
    if getattr(app, "glassbox_gc", None) is None:
        app.glassbox_gc = IdleCollector(lambda: drawing_lately(GC_QUIET_S))


class IdleCollector(QObject):
    """Collects garbage on this thread every GC_EVERY_S, each generation once its count passes Python's
    threshold (as pyqtgraph's GarbageCollector does), but not in the middle of an update: while any of
    its `busy` tests holds it tries again GC_QUIET_S later, for at most GC_PUT_OFF_AT_MOST_S. A collection
    of the older generations walks every object the app holds (~50-150 ms); run at a timer's whim it
    landed inside an update now and then."""

    def __init__(self, busy: Callable[[], bool], clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._busy_now, self._clock = busy, clock
        self._owned_tests: list[weakref.WeakMethod] = []
        self._put_off_since: float | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.check)
        self._timer.start(round(GC_EVERY_S * 1000))

    def wait_while(self, busy) -> None:
        """Wait while the bound method busy() holds too (its object is not kept alive for it)."""
        self._owned_tests.append(weakref.WeakMethod(busy))

    def _busy(self) -> bool:
        self._owned_tests = [test for test in self._owned_tests if test() is not None]
        return self._busy_now() or any((method := test()) is not None and method() for test in self._owned_tests)

    def check(self) -> None:
        now = self._clock()
        if self._busy():
            if self._put_off_since is None:
                self._put_off_since = now
            if now - self._put_off_since < GC_PUT_OFF_AT_MOST_S:
                self._timer.start(round(GC_QUIET_S * 1000))
                return
        self._put_off_since = None
        generation = due_generation()
        if generation is not None:
            gc.collect(generation)
        self._timer.start(round(GC_EVERY_S * 1000))


def due_generation() -> int | None:
    """The oldest generation whose count passed its threshold, the younger ones all past theirs too (None: none)."""
    due = None
    for generation, (count, threshold) in enumerate(zip(gc.get_count(), gc.get_threshold())):
        if count <= threshold:
            break
        due = generation
    return due


def start_bundle(model: str | None, last_model: str | None) -> Bundle:
    """The bundle asked for (else the last one used); if it cannot be opened, say so and use the shipped one.

    Raises BundleError only when the shipped bundle cannot be opened either.
    """
    wanted = model or last_model
    if wanted:
        try:
            return load_bundle(wanted)
        except BundleError as exc:
            QMessageBox.warning(None, "Glassbox", f"Could not open the model bundle:\n{exc}\n\n"
                                                  "Opening the shipped model instead.")
    return load_bundle(None)


def open_main_window(controller: Controller, settings, text: str) -> MainWindow:
    """The main window, shown, with `text` in its sentence bar and under analysis.

    The sentence goes to the worker first: it opens the ONNX session and runs the first forward pass
    while this thread builds the window (both take a while; the window cannot draw before both are
    done). The result waits in the event queue until the window is there to show it.
    """
    controller.set_text(text)
    controller.flush()
    window = MainWindow(controller, settings)
    window.show()
    window.sentence_bar.setText(text)   # what the controller already runs: no second run
    return window


def split_model_argument(model: str | None) -> tuple[str | None, str | None]:
    """(bundle to open, Hugging Face folder to offer to import): a --model folder is one or the other."""
    if model and is_hf_folder(model):
        return None, model
    return model, None


def quit_everything(app: QApplication) -> None:
    """Close every window (the main window saves its settings and stops its worker), dialogs included,
    and leave every event loop, a modal dialog's too."""
    for widget in app.topLevelWidgets():
        if widget.isVisible():
            widget.close()
    app.quit()


@contextlib.contextmanager
def quit_on_ctrl_c(app: QApplication) -> Iterator[threading.Event]:
    """While inside, Ctrl+C (SIGINT) quits the app, even during a modal dialog; yields the Event it sets.

    Python runs a signal handler only between bytecodes, and Qt's event loops (the main one, and each
    dialog's exec()) are C++. The C-level handler writes the signal number to a socket
    (signal.set_wakeup_fd), whose QSocketNotifier wakes whichever loop is running, which calls into
    Python, which runs the handler. Previous handlers are restored on the way out.
    """
    interrupted = threading.Event()
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    notifier = QSocketNotifier(reader.fileno(), QSocketNotifier.Type.Read)
    notifier.activated.connect(lambda *_: _drain(reader))

    def on_sigint(*_) -> None:
        interrupted.set()
        quit_everything(app)

    previous_handler = signal.signal(signal.SIGINT, on_sigint)
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    try:
        yield interrupted
    finally:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGINT, previous_handler)
        notifier.setEnabled(False)
        reader.close()
        writer.close()


def _drain(reader: socket.socket) -> None:
    with contextlib.suppress(BlockingIOError):
        while reader.recv(64):
            pass


def run_app(model: str | None = None, text: str | None = None) -> int:
    app = application()
    model, to_import = split_model_argument(model)
    with quit_on_ctrl_c(app) as interrupted:
        settings = default_settings()
        try:
            bundle = start_bundle(model, settings.value("model/last") if model is None else None)
        except BundleError as exc:
            print(f"glassbox: error: {exc}", file=sys.stderr)
            return 2
        if interrupted.is_set():   # Ctrl+C while the start-up warning was open
            return INTERRUPTED
        backend = str(settings.value("model/backend", "onnx"))
        controller = Controller(bundle, backend if backend in BACKENDS else "onnx")
        app.aboutToQuit.connect(controller.shutdown)
        window = open_main_window(controller, settings,
                                  text if text is not None else str(settings.value("sentence/last", FIRST_SENTENCE)))
        window.sentence_bar.setFocus()
        if to_import:   # asked once the window is up; the last model (or the shipped one) is open meanwhile
            QTimer.singleShot(0, lambda: window.imports.offer_import(to_import))
        QTimer.singleShot(0, lambda: interrupted.is_set() and quit_everything(app))   # Ctrl+C just before exec()
        status = app.exec()
        return INTERRUPTED if interrupted.is_set() else status
