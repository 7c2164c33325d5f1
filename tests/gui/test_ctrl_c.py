"""Ctrl+C in the terminal quits the app, from its main window and from a modal dialog alike.

Each case runs the real app in a child process (a signal is process-wide), waits until the child's
event loop is running, sends SIGINT once, and expects the child to end by itself.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READY = "event loop running"
# The first event loop to run is the start-up warning's exec() when the model is missing, else app.exec().
CHILD = f"""
import sys
from PySide6.QtCore import QTimer
from gui.app import application, run_app
app = application()
QTimer.singleShot(0, lambda: print({READY!r}, flush=True))
status = run_app(model=sys.argv[1] or None, text="hello from the child")
print("exit", status, "windows", [w.objectName() for w in app.topLevelWidgets() if w.isVisible()], flush=True)
sys.exit(status)
"""
LIVENESS_S = 120   # only reached if Ctrl+C is ignored: the child is then killed and the test fails


def run_child_and_interrupt(tmp_path, model: str) -> tuple[int, str]:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "config"))
    child = subprocess.Popen([sys.executable, "-c", CHILD, model], cwd=ROOT, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert child.stdout.readline().strip() == READY, child.stderr.read()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=LIVENESS_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail("Ctrl+C did not end the app")
    return child.returncode, out + err


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT cannot be sent to a child process on Windows")
def test_ctrl_c_quits_while_the_start_up_warning_is_open(tmp_path):
    status, output = run_child_and_interrupt(tmp_path, str(tmp_path / "no such bundle"))
    assert status == 130, output
    assert "exit 130 windows []" in output
    assert "Traceback" not in output


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT cannot be sent to a child process on Windows")
def test_ctrl_c_closes_the_main_window_properly(tmp_path):
    status, output = run_child_and_interrupt(tmp_path, "")
    assert status == 130, output
    assert "exit 130 windows []" in output and "Traceback" not in output
    saved = (tmp_path / "config" / "Glassbox" / "Glassbox.conf").read_text(encoding="utf-8")
    assert "hello from the child" in saved   # closeEvent ran: settings saved, worker stopped
