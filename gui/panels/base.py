"""What every panel is: a QWidget that draws a Trace and the shared Selection, and offers figures.

Panels never run the model and never reach into a bundle: they read the Trace (plain data)
and the Selection, and ask the controller for anything else through their signals.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from core.trace import Trace
from gui.selection import Selection


@dataclass
class Figure:
    """One exportable picture of a panel, plus the numbers behind it.

    name:   stable file stem, lower_snake_case and prefixed by the panel (e.g. "attention_head");
            exports write NAME.png / NAME.svg, and NAME.csv when `table` is given.
    widget: the QWidget drawn (rendered as it is on screen, at any width).
    table:  returns the numbers behind the picture as CSV text (core.raw_export helpers), or None.
    """
    name: str
    widget: QWidget
    table: Callable[[], str] | None = None
    extra_tables: dict[str, Callable[[], str]] = field(default_factory=dict)  # more NAME.csv files


class Panel(QWidget):
    title: str = "Panel"          # the dock's title and the View menu entry
    object_name: str = "panel"    # QDockWidget objectName: saveState/restoreState need it stable

    # A panel asks; the controller acts and everyone hears back through set_trace / set_selection.
    sigSelect = Signal(dict)                 # selection changes, e.g. {"layer": 1, "head": 2}
    sigAppendTokens = Signal(list)           # token ids to append to the sentence, then re-run
    sigStepBack = Signal()                   # undo the last append
    sigGenerate = Signal(object)             # (n_tokens: int, core.sampling.SamplingSettings)
    sigRequestVariant = Signal(str, object)  # (tag, {"head_mask": ..., "expert_override": ...}) -> set_variant
    sigHoverText = Signal(int, int)          # highlight characters [start, end) of the sentence; (-1, -1) clears

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.trace: Trace | None = None
        self.selection = Selection()

    def set_trace(self, trace: Trace | None) -> None:
        """A new Trace (None: nothing to show, e.g. empty text). Store it and redraw."""
        self.trace = trace
        self.refresh()

    def set_selection(self, selection: Selection) -> None:
        self.selection = selection
        self.refresh()

    def set_variant(self, tag: str, trace: Trace | None) -> None:
        """The answer to sigRequestVariant(tag, ...): a Trace run with those interventions (None if it failed)."""

    def refresh(self) -> None:
        """Redraw from self.trace and self.selection; must handle trace None (show an empty state)."""
        raise NotImplementedError

    def figures(self) -> list[Figure]:
        """Every picture this panel can export, for the current trace and selection."""
        raise NotImplementedError
