"""What every panel is: a QWidget that draws a Trace and the shared Selection, and offers figures.

Panels never run the model and never reach into a bundle: they read the Trace (plain data)
and the Selection, and ask the controller for anything else through their signals.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import QGraphicsView, QLabel, QStackedWidget, QVBoxLayout, QWidget
from shiboken6 import isValid

from core.trace import Trace
from core.trace_fields import describe_request, trace_holds
from gui.after_paints import after_pending_paints
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


FRAME_S = 1 / 60      # panels posted to draw at most once per frame
LAYOUT_ROUNDS = 10    # a change deep in a panel climbs one layout a round to the window, whose relayout comes back
_NOTHING = object()   # no trace (or selection) waits to be drawn; None is a trace: "nothing to show"
_DRAW_EVENT = QEvent.Type(QEvent.registerEventType())   # posted to the frame clock: draw now


def settle_layouts() -> None:
    """Handle the layout requests that drawing posted now, before the paint: handled after it, they
    would cost a second layout pass and a second paint of every plot."""
    for _ in range(LAYOUT_ROUNDS):
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)


class _HoldRepaint(QObject):
    """On a window: keeps its repaint (QEvent.UpdateRequest) from being delivered, and remembers it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.held: set[int] = set()   # id() of the windows whose repaint was held

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.UpdateRequest:
            self.held.add(id(watched))
            return True
        return False


def paint_views_together(panels) -> None:
    """Let the graphics scenes of the panels drawn take in their changes now, so that the window paints
    them all in one pass with the rest of the frame.

    Each scene takes in its changed items in an event it posts to itself, and then paints the window at
    once (QGraphicsView dispatches the window's pending repaint): three plots changed in a frame painted
    the window three times more, each pass after a turn of the event loop. Here every scene's event is
    delivered now while the window's repaint is held back, and the repaint is then posted once."""
    views = [view for panel in panels for view in panel.findChildren(QGraphicsView) if view.isVisible()]
    if not views:
        return
    windows = {id(view.window()): view.window() for view in views}
    hold = _HoldRepaint()
    for window in windows.values():
        window.installEventFilter(hold)
    try:
        for view in views:
            QCoreApplication.sendPostedEvents(view.scene(), QEvent.Type.MetaCall)
    finally:
        for key, window in windows.items():
            window.removeEventFilter(hold)
            if key in hold.held:   # Qt waits for this event before it asks for another: post it again
                QCoreApplication.postEvent(window, QEvent(QEvent.Type.UpdateRequest), Qt.EventPriority.LowEventPriority.value)


class _Frame(QObject):
    """The one clock every posted panel draws by: the panels posted to within a frame draw together,
    then their layouts settle once and the window paints once (three panels drawing one after the
    other would each relayout the main window and its docks).

    Leading edge: posted to while the clock is idle (its last frame a frame ago or more), the panels
    draw at the event loop's next pass, before the paint it has pending, so that one paint shows
    them and what else the result changed (the status bar). Posted to sooner, they wait for the
    rest of the frame: results arriving faster than frames are drawn once a frame."""

    def __init__(self) -> None:
        super().__init__()
        self._waiting: dict[int, Panel] = {}
        self._last = -1.0      # time.monotonic() of the last frame
        self._due = False      # a frame is posted or timed
        self._painting = False   # a frame was drawn and the window has not painted it yet
        self._painted = -1.0     # time.monotonic() the last frame's paint was over
        self._paced = False      # a panel posted to this frame counts it towards the frame rate
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._draw)

    def schedule(self, panel: Panel, paced: bool = True) -> None:
        """Draw `panel` at the next frame. Unpaced (a run's tokens, posted while the model runs): the frame
        that draws it does not count, so the run's result a few milliseconds later does not wait for it."""
        self._waiting[id(panel)] = panel
        self._paced = self._paced or paced
        if self._due:
            return
        self._due = True
        wait = FRAME_S - (time.monotonic() - self._last)
        if wait > 0:
            self._timer.start(round(wait * 1000))
        else:   # a posted event: handled before the paint event, which Qt posts at low priority
            QCoreApplication.postEvent(self, QEvent(_DRAW_EVENT))

    def event(self, event: QEvent) -> bool:
        if event.type() == _DRAW_EVENT:
            self._draw()
            return True
        return super().event(event)

    def _draw(self) -> None:
        """One panel failing to draw must not stop the others: the error goes to sys.excepthook."""
        if self._paced:
            self._last = time.monotonic()
        self._due = self._paced = False
        panels, self._waiting = [p for p in self._waiting.values() if isValid(p)], {}
        drawn = []
        for panel in panels:
            try:
                if panel.draw_posted():
                    drawn.append(panel)
            except Exception:
                sys.excepthook(*sys.exc_info())
                panel.sigDrawFailed.emit()
        settle_layouts()
        for panel in drawn:
            panel.prepare_plots()
        paint_views_together(drawn)
        self._painting = True
        after_pending_paints(self, self._paint_over)

    def _paint_over(self) -> None:
        self._painting, self._painted = False, time.monotonic()


_frame: _Frame | None = None


def drawing_lately(within_s: float) -> bool:
    """Panels are posted to draw at the next frame, or drew one the window has not painted yet or painted
    less than `within_s` seconds ago: an update is under way, and work that can wait should (gui.app's
    garbage collector)."""
    frame = _frame
    return frame is not None and (frame._due or frame._painting or time.monotonic() - frame._painted < within_s)


def _the_frame() -> _Frame:
    global _frame
    if _frame is None:   # made on first use: its timer needs the application
        _frame = _Frame()
    return _frame


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
    # Every figure the panel can offer, declared once: name -> "" when any sentence draws it, else when it is
    # drawn ("in the app, after a what-if run": no export of a sentence draws it). An upper-case word stands for
    # a part that varies (step_NN_KEY: step_01_x, …). gui.headless reads it from the class, before any is built.
    figure_names: dict[str, str] = {}
    empty_text: str = "Type a sentence in the bar above."
    # The Trace fields draw() and figures() read (Runner.run's `fields` names); None: every field. A big
    # model's runs keep only what the panels on screen declare (gui.controller.Controller.fields_to_run).
    fields: tuple[str, ...] | None = None

    # A panel asks; the controller acts and everyone hears back through set_trace / set_selection.
    sigSelect = Signal(dict)                 # selection changes, e.g. {"layer": 1, "head": 2}
    sigAppendTokens = Signal(list)           # token ids to append to the sentence, then re-run
    sigStepBack = Signal()                   # take back the last appended token
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

    def post_trace(self, trace: Trace | None, selection: Selection, paced: bool = True) -> None:
        """Store the newest trace and its selection; drawn at the next frame (one refresh for both).
        paced=False: a run's tokens-only trace, which the run's result follows at once (_Frame.schedule)."""
        if self._is_run_of_tokens_shown(trace, selection):
            self.trace = trace   # what this panel reads is the same in both: nothing to draw
            return
        self._posted_trace, self._posted_selection = trace, selection
        _the_frame().schedule(self, paced)

    def _is_run_of_tokens_shown(self, trace: Trace | None, selection: Selection) -> bool:
        """`trace` is the result of the run whose tokens-only trace (core.session.tokens_trace) this panel shows,
        with the same selection, and this panel reads no field of it: it would draw the same again."""
        shown = self.trace
        return (shown is not None and trace is not None and shown.fields == frozenset()
                and shown.tokenization is not None and trace.tokenization is shown.tokenization
                and selection == self.selection and not self.has_posted() and trace_holds(shown, self.fields))

    def post_selection(self, selection: Selection) -> None:
        """Store the newest selection; drawn at the next frame, with a posted trace if one waits.
        With none waiting it is self.selection at once (it is clamped to the trace shown, too)."""
        if self._posted_trace is _NOTHING:
            self.selection = selection
        self._posted_selection = selection
        _the_frame().schedule(self)

    def has_posted(self) -> bool:
        """A posted trace or selection is waiting to be drawn."""
        return self._posted_trace is not _NOTHING or self._posted_selection is not _NOTHING

    def flush(self) -> None:
        """Draw the posted trace and selection now (nothing if none waits), then let the layouts that
        drawing changed settle, so the paint that follows sees the final sizes."""
        if self.draw_posted():
            settle_layouts()
            self.prepare_plots()
            paint_views_together([self])

    def draw_posted(self) -> bool:
        """Draw the posted trace and selection, if any waits (True then); the layouts are left to settle."""
        trace, selection = self._posted_trace, self._posted_selection
        self._posted_trace = self._posted_selection = _NOTHING
        if trace is _NOTHING and selection is _NOTHING:
            return False
        if trace is not _NOTHING:
            if selection is not _NOTHING:
                self.selection = selection
            self.set_trace(trace)
        else:
            self.set_selection(selection)
        return True

    def prepare_plots(self) -> None:
        """Apply the plots' new ranges now. pyqtgraph moves a ViewBox's items to a new range when the
        view is about to paint (GraphicsScene.prepareForPaint): moved during the paint, they would
        ask for a second paint of the whole plot."""
        for view in self.findChildren(QGraphicsView):
            prepare = getattr(view.scene(), "prepareForPaint", None)
            if prepare is not None and view.isVisible():
                prepare()

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

    def why_no_figures(self) -> str:
        """Why figures() holds nothing now, in one sentence ("" if it holds something, or nothing explains it)."""
        return self.empty.text() if self.showing_empty_state() else ""
