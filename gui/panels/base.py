"""What every panel is: a QWidget that draws a Trace and the shared Selection, and offers figures.

Panels never run the model and never reach into a bundle: they read the Trace (plain data)
and the Selection, and ask the controller for anything else through their signals.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from PySide6.QtCore import QCoreApplication, QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import QLabel, QStackedWidget, QVBoxLayout, QWidget

from core.trace import Trace
from core.trace_fields import describe_request, trace_holds
from gui.intervention_banner import InterventionBanner
from gui.selection import Selection


@dataclass
class Figure:
    """One exportable picture of a panel, plus the numbers behind it.

    name:   stable file stem, lower_snake_case and prefixed by the panel (e.g. "attention_head");
            exports write NAME.png / NAME.svg, and NAME.csv when `table` is given.
    widget: the QWidget drawn (the view the screen shows, laid out at its page size for export).
    table:  returns the numbers behind the picture as CSV text (core.raw_export helpers), or None.
    page_size: the widget's size on the page, from its content (e.g. cells × tokens); None: the
            default page (gui/figure_pages.py). Exports lay the widget out at it, never at the dock's size.
    """
    name: str
    widget: QWidget
    table: Callable[[], str] | None = None
    extra_tables: dict[str, Callable[[], str]] = field(default_factory=dict)  # more NAME.csv files
    page_size: Callable[[], QSize] | None = None


FRAME_S = 1 / 60      # a panel posted to draws at most once per frame
LAYOUT_ROUNDS = 3     # a layout resizes children, whose layouts ask again: a few rounds settle them
_NOTHING = object()   # no trace (or selection) waits to be drawn; None is a trace: "nothing to show"


class Panel(QWidget):
    """Subclasses build their widgets, hand them to set_content, and implement draw() and figures().

    The base class shows `empty_text` while there is no trace, and calls draw() when there is one.
    The selection arrives clamped to the trace by the controller: panels use it as it is
    (Selection.query_index / key_index only resolve "None: the last token").

    Two ways in. set_trace / set_selection draw at once. post_trace / post_selection (what the main
    window uses) store the newest trace and selection and draw them once, at the next frame: results
    arriving faster than frames are not drawn one by one. flush() draws what is stored now; call it
    before reading what a posted panel shows (tests, exports, the bench).
    """
    title: str = "Panel"          # the dock's title and the View menu entry
    object_name: str = "panel"    # QDockWidget objectName: saveState/restoreState need it stable
    empty_text: str = "Type a sentence in the bar above."
    # The Trace fields draw() and figures() read (Runner.run's `fields` names); None: every field. A big
    # model's runs keep only what the panels on screen declare (gui.controller.Controller.fields_to_run).
    fields: tuple[str, ...] | None = None

    # A panel asks; the controller acts and everyone hears back through set_trace / set_selection.
    sigSelect = Signal(dict)                 # selection changes, e.g. {"layer": 1, "head": 2}
    sigAppendTokens = Signal(list)           # token ids to append to the sentence, then re-run
    sigStepBack = Signal()                   # undo the last append
    sigGenerate = Signal(object)             # (n_tokens: int, core.sampling.SamplingSettings)
    sigRequestVariant = Signal(str, object)  # (tag, {"head_mask": ..., "expert_override": ...}) -> set_variant
    sigHoverText = Signal(int, int)          # highlight characters [start, end) of the sentence; (-1, -1) clears
    sigSetInterventions = Signal(object)     # core.interventions.Interventions: the ablations for every run
    sigShowPatched = Signal(str, object)     # (text, Interventions with a patch): show that run everywhere
    sigRunExperiment = Signal(object)        # gui.experiment_job.ExperimentJob: run on the model worker
    sigDrawFailed = Signal()                 # a posted draw raised (the error went to sys.excepthook)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.trace: Trace | None = None
        self.selection = Selection()
        self.empty = QLabel(self.empty_text)
        self.empty.setObjectName("empty_state")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self._stack = QStackedWidget()
        self._stack.addWidget(self.empty)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        self.intervention_banner = InterventionBanner()   # what the run shown has switched off or patched
        layout.addWidget(self.intervention_banner)
        layout.addWidget(self._stack)
        self._posted_trace = self._posted_selection = _NOTHING
        self._last_flush = -1.0   # time.monotonic() of the last posted draw
        self._frame_timer = QTimer(self)
        self._frame_timer.setSingleShot(True)
        self._frame_timer.timeout.connect(self._flush_on_frame)

    def set_content(self, content: QWidget) -> None:
        """What the panel shows while there is a trace (called once, while building)."""
        self._stack.addWidget(content)

    def showing_empty_state(self) -> bool:
        return self._stack.currentWidget() is self.empty

    def set_trace(self, trace: Trace | None) -> None:
        """A new Trace (None: nothing to show, e.g. empty text). Store it and redraw."""
        self.trace = trace
        self.intervention_banner.show_for(trace)
        self.refresh()

    def set_selection(self, selection: Selection) -> None:
        self.selection = selection
        self.refresh()

    def post_trace(self, trace: Trace | None, selection: Selection) -> None:
        """Store the newest trace and its selection; drawn at the next frame (one refresh for both)."""
        self._posted_trace, self._posted_selection = trace, selection
        self._schedule_frame()

    def post_selection(self, selection: Selection) -> None:
        """Store the newest selection; drawn at the next frame, with a posted trace if one waits.
        With none waiting it is self.selection at once (it is clamped to the trace shown, too)."""
        if self._posted_trace is _NOTHING:
            self.selection = selection
        self._posted_selection = selection
        self._schedule_frame()

    def has_posted(self) -> bool:
        """A posted trace or selection is waiting to be drawn."""
        return self._posted_trace is not _NOTHING or self._posted_selection is not _NOTHING

    def flush(self) -> None:
        """Draw the posted trace and selection now (nothing if none waits), then let the layouts that
        drawing changed settle, so the paint that follows sees the final sizes."""
        self._frame_timer.stop()
        trace, selection = self._posted_trace, self._posted_selection
        self._posted_trace = self._posted_selection = _NOTHING
        if trace is _NOTHING and selection is _NOTHING:
            return
        self._last_flush = time.monotonic()
        if trace is not _NOTHING:
            if selection is not _NOTHING:
                self.selection = selection
            self.set_trace(trace)
        else:
            self.set_selection(selection)
        # New labels and sizes post layout requests; handled after the first paint they would cost a
        # second layout pass and a second paint of every plot.
        for _ in range(LAYOUT_ROUNDS):
            QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)

    def _schedule_frame(self) -> None:
        if not self._frame_timer.isActive():
            wait = FRAME_S - (time.monotonic() - self._last_flush)
            self._frame_timer.start(max(0, round(wait * 1000)))

    def _flush_on_frame(self) -> None:
        """One panel failing to draw must not stop the others: the error goes to sys.excepthook."""
        try:
            self.flush()
        except Exception:
            sys.excepthook(*sys.exc_info())
            self.sigDrawFailed.emit()

    def set_variant(self, tag: str, trace: Trace | None) -> None:
        """The answer to sigRequestVariant(tag, ...): a Trace run with those interventions (None if it failed)."""

    def refresh(self) -> None:
        """Redraw from self.trace and self.selection: the empty state, or draw()."""
        reason = self.empty_text if self.trace is None else (self.fields_missing(self.trace)
                                                             or self.unavailable(self.trace))
        if reason is not None:
            self.empty.setText(reason)
            self._stack.setCurrentWidget(self.empty)
            self.clear()
            return
        self._stack.setCurrentIndex(1)
        self.draw()

    def fields_missing(self, trace: Trace) -> str | None:
        """What this panel needs when a partial trace lacks it (the controller is fetching it), else None."""
        if trace_holds(trace, self.fields):
            return None
        return f"Computing what this panel draws ({describe_request(self.fields)}) for this big model…"

    def unavailable(self, trace: Trace) -> str | None:
        """Why this panel has nothing to show for this trace (e.g. a dense model has no router), else None."""
        return None

    def draw(self) -> None:
        """Draw self.trace (never None here) with self.selection."""
        raise NotImplementedError

    def clear(self) -> None:
        """The trace went away: forget what was drawn for it (nothing to do by default)."""

    def figures(self) -> list[Figure]:
        """Every picture this panel can export, for the current trace and selection."""
        raise NotImplementedError
