"""Importing gui.app turns automatic garbage collection off: the app collects on a timer of the GUI thread
(gui.app.collect_garbage_on_this_thread), and start-up's imports do not pay for ~180 automatic passes."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_app_leaves_automatic_collection_off():
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    shown = subprocess.run([sys.executable, "-c", "import gc; assert gc.isenabled(); import gui.app; print(gc.isenabled())"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["False"]
