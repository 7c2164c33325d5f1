"""`main.py export`: every panel's figures for one sentence, without a display.

Each registered panel is built in its own offscreen window of a fixed size (so figures look the
same on every machine), given the Trace, and asked for its figures; gui.export renders and writes
them. File names are the figures' stable names (see gui/export.py for the pattern).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

PANEL_SIZE = (1100, 760)   # logical pixels of each offscreen panel window


def ensure_offscreen() -> None:
    """Headless export never opens windows on a desktop: use Qt's offscreen platform unless told otherwise."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def _quiet_offscreen_warnings() -> None:
    """The offscreen platform warns once per window that it cannot propagate size hints: noise for a CLI."""
    from PySide6.QtCore import qInstallMessageHandler

    def handler(mode, context, message: str) -> None:
        if "propagateSizeHints" not in message:
            sys.stderr.write(message + "\n")

    qInstallMessageHandler(handler)


def export_sentence(text: str, out: str | os.PathLike, model: str | None = None,
                    formats: str = "png,svg,csv,npz", width: int | None = None,
                    backend: str = "onnx") -> list[Path]:
    """Write every figure of every panel for `text` into `out`; return the paths written.

    Raises ValueError (bad text, format, width or bundle) or OSError (an unwritable folder)
    with a one-line message.
    """
    from gui.export import parse_formats

    chosen = parse_formats(formats)
    if width is not None and width <= 0:
        raise ValueError(f"--width must be a positive number of pixels, got {width}")
    ensure_offscreen()

    from core.bundle import load_bundle
    from core.raw_export import ensure_writable_folder
    from core.runners import make_runner
    from core.session import analyse

    bundle = load_bundle(model)
    runner = make_runner(bundle, backend)
    trace = analyse(runner, text)
    ensure_writable_folder(out)   # fail before the slow part, not after it
    return _render_and_write(trace, out, chosen, width, runner)


def _render_and_write(trace, out, formats, width, runner) -> list[Path]:
    from PySide6.QtWidgets import QApplication

    from core.head_roles import probe_roles
    from gui.app import application
    from gui.export import all_files, write_files
    from gui.panels.registry import panel_classes
    from gui.selection import Selection

    _quiet_offscreen_warnings()
    app = application()
    panels = []
    try:
        for cls in panel_classes():
            panel = cls()
            if hasattr(panel, "sigRequestProbe"):   # what the controller does in the app, on this thread
                panel.sigRequestProbe.connect(lambda p=panel: p.set_probe(probe_roles(runner)))
            panel.resize(*PANEL_SIZE)
            panel.show()
            panel.selection = Selection()
            panel.set_trace(trace)
            panels.append(panel)
        for _ in range(3):   # let layouts settle and deferred repaints run before painting to files
            app.processEvents()
        figures = [figure for panel in panels for figure in panel.figures()]
        files = all_files(figures, trace, formats, width)
    finally:
        for panel in panels:
            panel.close()
            panel.deleteLater()
        QApplication.processEvents()
    return write_files(out, files)
