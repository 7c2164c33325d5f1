"""The app paints its fills on the painting thread: Qt's pool of fill threads cost more to hand a fill to
than the fill itself on a 2-core machine (gui.app.keep_fills_on_the_painting_thread)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A fill tall enough for Qt to split across threads, then the names of the process's threads.
PAINT_A_BIG_FILL = """
import json, os
from gui.app import application
from PySide6.QtGui import QColor, QImage, QPainter
app = application()
image = QImage(1200, 1200, QImage.Format.Format_ARGB32_Premultiplied)
painter = QPainter(image)
painter.fillRect(0, 0, 1200, 1200, QColor(10, 20, 30, 128))
painter.end()
print(json.dumps([open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads are listed from Linux's /proc")
def test_the_app_fills_without_qts_thread_pool():
    env = {k: v for k, v in os.environ.items() if k != "QT_NO_GUI_THREADPOOL"} | {"QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-c", PAINT_A_BIG_FILL], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    threads = json.loads(done.stdout.strip().splitlines()[-1])
    assert not [name for name in threads if "pooled" in name], threads
