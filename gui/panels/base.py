"""What every panel is: a QWidget that draws a Trace and the shared Selection, and offers figures.

Panels never run the model and never reach into a bundle: they read the Trace (plain data)
and the Selection, and ask the controller for anything else through their signals.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import QLabel, QStackedWidget, QVBoxLayout, QWidget

from core.trace import Trace
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


class Panel(QWidget):
    """Subclasses build their widgets, hand them to set_content, and implement draw() and figures().

    The base class shows `empty_text` while there is no trace, and calls draw() when there is one.
    The selection arrives clamped to the trace by the controller: panels use it as it is
    (Selection.query_index / key_index only resolve "None: the last token").
    """
    title: str = "Panel"          # the dock's title and the View menu entry
    object_name: str = "panel"    # QDockWidget objectName: saveState/restoreState need it stable
    empty_text: str = "Type a sentence in the bar above."

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

    def set_variant(self, tag: str, trace: Trace | None) -> None:
        """The answer to sigRequestVariant(tag, ...): a Trace run with those interventions (None if it failed)."""

    def refresh(self) -> None:
        """Redraw from self.trace and self.selection: the empty state, or draw()."""
        reason = self.empty_text if self.trace is None else self.unavailable(self.trace)
        if reason is not None:
            self.empty.setText(reason)
            self._stack.setCurrentWidget(self.empty)
            self.clear()
            return
        self._stack.setCurrentIndex(1)
        self.draw()

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
