"""A long experiment (a patching sweep, an occlusion) run on the controller's experiment worker, with progress and Cancel.

The panel builds the job; the controller calls `fn(runner)` on its experiment thread (not the one
that analyses the sentence, so typing is never held up by a sweep) and hands the
result to `on_done` (or the one-line message to `on_error`) on the UI thread. The job's
`progress(done, total)` is what core's sweeps call after each run: it forwards the count to the
UI through a queued signal and raises `Cancelled` once Cancel was pressed, which ends the sweep.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from PySide6.QtCore import QObject, Signal


class Cancelled(Exception):
    def __str__(self) -> str:
        return "cancelled"


class ProgressRelay(QObject):
    """Lives on the UI thread; the worker emits through it (Qt queues the signal across threads)."""
    sigProgress = Signal(int, int)


@dataclass
class ExperimentJob:
    fn: Callable[[Any], Any]            # runner -> result, on the worker thread
    on_done: Callable[[Any], None]
    on_error: Callable[[str], None]
    relay: ProgressRelay | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    checkpoint: Callable[[], None] = lambda: None   # the worker's own: raises when the app is closing

    def progress(self, done: int, total: int) -> None:
        self.checkpoint()
        if self.cancel_event.is_set():
            raise Cancelled()
        if self.relay is not None:
            self.relay.sigProgress.emit(done, total)

    def cancel(self) -> None:
        self.cancel_event.set()
