"""gui/panels/registry.py and what start-up imports: a panel's module loads when the panel is built, and
the model code loads before Qt (see gui/app.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gui.panels.base import Panel
from gui.panels.registry import PANELS, PanelEntry, panel_classes

ROOT = Path(__file__).resolve().parents[2]
SHOWN_AT_START = {"tokens", "attention", "next_token"}   # gui.main_window.DEFAULT_LAYOUT raises these

OPEN_WINDOW = """
import json, os, sys, time
from PySide6.QtCore import QSettings
from core.bundle import load_bundle
from gui.app import application, open_main_window
from gui.controller import Controller

app = application()
controller = Controller(load_bundle(sys.argv[1]), "numpy")
window = open_main_window(controller, QSettings(sys.argv[2], QSettings.Format.IniFormat), "The cat sat on the mat.")
deadline = time.monotonic() + 60
while (controller.trace is None or controller.busy()) and time.monotonic() < deadline:
    app.processEvents()
window.flush_redraws()
print(json.dumps({"built": [p.object_name for p in window.built_panels()], "traced": controller.trace is not None,
                  "modules": list(sys.modules)}))
sys.stdout.flush()
os._exit(0)
"""


def run_python(code: str, *args: str) -> str:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_every_line_names_its_class_object_name_and_title():
    classes = panel_classes()
    assert len(classes) == len(PANELS) == len({entry.object_name for entry in PANELS})
    for entry, cls in zip(PANELS, classes):
        assert issubclass(cls, Panel)
        assert (cls.object_name, cls.title) == (entry.object_name, entry.title)
        assert PanelEntry.of(cls) == entry


def test_a_started_window_has_imported_only_the_panels_it_shows_and_no_export_code(bundle, tmp_path):
    shown = json.loads(run_python(OPEN_WINDOW, str(bundle.path), str(tmp_path / "settings.ini")))
    assert shown["traced"] and set(shown["built"]) == SHOWN_AT_START
    modules = set(shown["modules"])
    for entry in PANELS:
        assert (entry.where.partition(":")[0] in modules) == (entry.object_name in SHOWN_AT_START), entry
    assert not {"gui.export", "gui.svg_export", "gui.export_dialog", "matplotlib"} & modules


def test_the_app_imports_numpy_onnx_and_the_model_code_before_qt():
    """PySide6 reads the source of every module imported after it (its __feature__ check): they come first."""
    modules = json.loads(run_python("import json, sys, gui.app; print(json.dumps(list(sys.modules)))"))
    qt = modules.index("PySide6")
    assert all(modules.index(name) < qt for name in ("numpy", "onnx", "core.runners", "core.tokenizer"))
