"""with qt_signals_blocked(widget): widget.setValue(v) — set a control without it reporting back.

A context manager instead of paired blockSignals(True/False) calls, so an exception cannot leave a
widget deaf; the widget's earlier blocked state is restored, so blocks nest.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from PySide6.QtCore import QObject


@contextmanager
def qt_signals_blocked(*objects: QObject) -> Iterator[None]:
    previous = [obj.blockSignals(True) for obj in objects]
    try:
        yield
    finally:
        for obj, was_blocked in zip(objects, previous):
            obj.blockSignals(was_blocked)
