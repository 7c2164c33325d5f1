"""Start the desktop app: QApplication, fonts, the bundle to open, the main window."""
from __future__ import annotations

import signal
import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from core.bundle import Bundle, BundleError, load_bundle
from gui.controller import BACKENDS, Controller
from gui.fonts import register_fonts
from gui.main_window import APPLICATION, ORGANISATION, MainWindow, default_settings

FIRST_SENTENCE = "订单成交，订单取消。The cat sat on the mat because it was tired."


def application() -> QApplication:
    app = QApplication.instance() or QApplication(sys.argv)
    app.setOrganizationName(ORGANISATION)
    app.setApplicationName(APPLICATION)
    register_fonts(app)
    return app


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


def _close_on_ctrl_c(window: MainWindow) -> None:
    """Ctrl+C in the terminal closes the window properly (settings saved, worker joined)."""
    signal.signal(signal.SIGINT, lambda *_: window.close())
    # Python only runs signal handlers between bytecodes: a timer gives it the chance while Qt waits.
    timer = QTimer(window)
    timer.timeout.connect(lambda: None)
    timer.start(250)


def run_app(model: str | None = None, text: str | None = None) -> int:
    app = application()
    settings = default_settings()
    try:
        bundle = start_bundle(model, settings.value("model/last") if model is None else None)
    except BundleError as exc:
        print(f"glassbox: error: {exc}", file=sys.stderr)
        return 2
    backend = str(settings.value("model/backend", "onnx"))
    controller = Controller(bundle, backend if backend in BACKENDS else "onnx")
    app.aboutToQuit.connect(controller.shutdown)
    window = MainWindow(controller, settings)
    _close_on_ctrl_c(window)
    window.show()
    window.sentence_bar.setText(text if text is not None else str(settings.value("sentence/last", FIRST_SENTENCE)))
    window.sentence_bar.setFocus()
    return app.exec()
