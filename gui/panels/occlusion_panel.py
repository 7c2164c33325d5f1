"""Which tokens mattered: occlusion (measured) beside attention rollout (an approximation), for one prediction.

For the selected position P and a target token (default: the top prediction there), each token
up to P is removed in turn, or replaced by a baseline token the user types, and the change in
log p(target) is drawn over the sentence — each token's text on its colour (gui.token_strip) — and
listed in a table (core.occlusion).
Beside it, attention rollout — row P of the product of the attention matrices with the residual
added (Abnar & Zuidema 2020) — which sees only attention weights: where the two disagree, the
user sees why attention alone is not an explanation. The runs go to the controller's experiment worker.
"""
from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QLineEdit, QSplitter, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from core.experiment_runs import occlude_typed
from core.occlusion import REMOVE, TABLE_HEADER, Occlusion
from gui import figure_pages as pages
from gui import plotting
from gui.chip_flow import MARGIN as CHIP_MARGIN
from gui.experiment_job import ExperimentJob
from gui.figure_frame import scrolling
from gui.panels.base import Figure, Panel
from gui.theme import page_style
from gui.token_strip import ColourScale, TokenStrip

ROLLOUT_NOTE = ("Attention rollout is an approximation: it multiplies attention weights (with the residual as "
                "attention to oneself) and ignores values, W_O, the experts and the norms.")
MIN_PAGE_WIDTH = 480   # the colour keys at their full length, the caption in a few lines
MIN_STRIPS_PX = 380    # the strips' least width beside the table (narrower, the table goes under them)
PLACEHOLDER_PAD_PX = 16  # a line edit's frame and text margins around its placeholder
TABLE_ROWS_UNDER = 12  # rows the table shows at once under the strips (the page scrolls to it)


class OcclusionPanel(Panel):
    title = "Occlusion"
    object_name = "occlusion"
    figure_names = {"occlusion_strip": ""}
    empty_text = "Type a sentence: occlusion shows which earlier tokens the selected prediction depends on."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.result: Occlusion | None = None
        self._asked: tuple | None = None   # what the last request was for; an older answer is dropped
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.addLayout(self._build_inputs())
        self.summary = QLabel()   # the figure's caption: which prediction, of which token, what was taken out
        self.summary.setObjectName("occlusion_summary")
        self.summary.setWordWrap(True)
        self.error = ""   # why the last run failed ("" when it did not)
        self.splitter = QSplitter()
        self.splitter.addWidget(self._build_strips())
        self.table = QTableWidget(0, len(TABLE_HEADER))
        # Short titles on two lines and no row numbers (pos says it): the numbers fit a narrow dock's table.
        self.table.setHorizontalHeaderLabels(["pos", "token", "Δ log p\n(occlusion)", "rollout\n(approx.)"])
        self.table.verticalHeader().hide()
        self.splitter.addWidget(self.table)
        self.splitter.setSizes([600, 360])
        self.splitter.splitterMoved.connect(lambda *_: setattr(self, "_split_by_user", True))
        self._split_by_user = False
        layout.addWidget(self.splitter, 1)
        note = QLabel(ROLLOUT_NOTE)
        note.setWordWrap(True)
        layout.addWidget(note)
        self.page_area = scrolling(page)
        self.set_content(self.page_area)   # its strips grow with the sentence: the page scrolls, the dock keeps its size

    def _build_inputs(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.mode = QComboBox()
        self.mode.addItems(["remove each token", "replace each token by"])
        self.baseline_edit, self.target_edit = QLineEdit(), QLineEdit()
        # Placeholders short enough to show whole in a 1280 x 800 window's right dock; the tool tips say the rest.
        self.baseline_edit.setPlaceholderText("text or #ID")
        self.baseline_edit.setToolTip("The token put in place of each token in turn: its text or #ID")
        self.target_edit.setPlaceholderText("top prediction")
        self.target_edit.setToolTip("The token whose log p is measured: its text or #ID; empty, the top prediction")
        self.baseline_edit.setEnabled(False)
        self.mode.currentIndexChanged.connect(lambda index: self.baseline_edit.setEnabled(index == 1))
        self.mode.currentIndexChanged.connect(lambda _index: self.refresh())
        for edit in (self.baseline_edit, self.target_edit):
            edit.editingFinished.connect(self.refresh)
            edit.setMinimumWidth(edit.fontMetrics().horizontalAdvance(edit.placeholderText()) + PLACEHOLDER_PAD_PX)
        for widget in (self.mode, self.baseline_edit, QLabel("target:"), self.target_edit):
            row.addWidget(widget)
        return row

    def _build_strips(self) -> QWidget:
        """The figure: the sentence coloured by occlusion, its key, then coloured by rollout, its key."""
        self.strips = QWidget()
        self.strips.setStyleSheet(page_style())   # the figures' paper, whatever the desktop
        layout = QVBoxLayout(self.strips)
        layout.addWidget(self.summary)
        self.delta_strip, self.rollout_strip = TokenStrip(12.0, 8.0), TokenStrip(12.0, 8.0)
        self.delta_bar = ColourScale(plotting.colormap(plotting.DIVERGING), "Δ log p")
        self.rollout_bar = ColourScale(plotting.colormap(), "share")
        self.result_parts: list[QWidget] = []   # what shows a result, hidden with it (the summary stays)
        for title, strip, bar in (("Occlusion: change in log p(target) when the token is taken out",
                                   self.delta_strip, self.delta_bar),
                                  ("Attention rollout (an approximation)", self.rollout_strip, self.rollout_bar)):
            for widget in (QLabel(title), strip, bar):
                layout.addWidget(widget)
                self.result_parts.append(widget)
        layout.addStretch(1)
        return self.strips

    # ------------------------------------------------------------ running
    def _request(self) -> tuple:
        baseline = self.baseline_edit.text().strip() if self.mode.currentIndex() == 1 else ""
        position = self.selection.query_index(self.trace.n_tokens)
        return (tuple(int(i) for i in self.trace.input_ids), position, self.target_edit.text().strip(), baseline,
                id(self.trace))

    def draw(self) -> None:
        asked = self._request()
        if asked == self._asked:
            return
        self._asked = asked
        self.error = ""
        ids, position, target, baseline, _ = asked
        labels = self.trace.labels()
        self.summary.setText(f"running occlusion for the prediction after position {position}…")
        self.sigRunExperiment.emit(ExperimentJob(
            lambda runner: occlude_typed(runner, np.array(ids, np.int64), labels, position, target, baseline),
            lambda result, asked=asked: self._on_done(asked, result),
            lambda message, asked=asked: self._on_error(asked, message)))

    def _on_error(self, asked: tuple, message: str) -> None:
        if asked == self._asked:
            self.error, self.result = message, None   # the last result is another request's: no figure of it
            self.summary.setText(f"occlusion: {message}")
            self._show_parts(False)   # its chips and rows, under this message, would read as the answer to it

    def _on_done(self, asked: tuple, result: Occlusion) -> None:
        if asked != self._asked or self.trace is None:
            return
        self.show_result(result)

    def clear(self) -> None:
        self._asked = None

    # ------------------------------------------------------------ drawing
    def _show_parts(self, shown: bool) -> None:
        for widget in (*self.result_parts, self.table):
            widget.setVisible(shown)

    def show_result(self, result: Occlusion) -> None:
        self.result = result
        self._show_parts(True)
        labels = result.token_labels()
        how = "removed" if result.baseline_id == REMOVE else f"replaced by {self.trace.vocab_label(result.baseline_id)!r}"
        self.summary.setText(f"prediction after position {result.position} ({labels[result.position]!r}) of "
                             f"{self.trace.vocab_label(result.target_id)!r}: log p = {result.logprob:.3f}; "
                             f"each token up to it, itself included, {how} in turn.")
        span = float(np.nanmax(np.abs(result.delta_logprob))) if np.isfinite(result.delta_logprob).any() else 1.0
        span = max(span, 1e-6)
        self.delta_strip.set_values(labels, result.delta_logprob, (-span, span),
                                    plotting.colormap(plotting.DIVERGING), skipped="not run")
        self.delta_bar.set_levels((-span, span))
        top = max(float(result.rollout.max()), 1e-6)
        self.rollout_strip.set_values(labels, result.rollout, (0, top), plotting.colormap(), "{:.2f}")
        self.rollout_bar.set_levels((0, top))
        for strip in (self.delta_strip, self.rollout_strip):
            strip.set_marked(result.position)
        self._fill_table()

    def _fill_table(self) -> None:
        rows = self.result.rows()[1:]
        self.table.setRowCount(len(rows))
        for r, (position, label, delta, rollout) in enumerate(rows):
            texts = (str(position), label, "" if np.isnan(delta) else f"{delta:+.3f}", f"{rollout:.3f}")
            for c, text in enumerate(texts):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        self._give_table_its_width()

    def _give_table_its_width(self) -> None:
        """Beside the strips when the panel holds both (the table as wide as its columns), else under them,
        its rows in view: a narrow dock's table showed two columns of four. The user's drag stays."""
        table = self.table
        wanted = (table.horizontalHeader().length() + table.verticalScrollBar().sizeHint().width()
                  + 2 * table.frameWidth())
        beside = self.width() >= MIN_STRIPS_PX + wanted
        self.splitter.setOrientation(Qt.Orientation.Horizontal if beside else Qt.Orientation.Vertical)
        rows = min(table.rowCount(), TABLE_ROWS_UNDER)
        table.setMinimumHeight(0 if beside else table.horizontalHeader().height() + rows * table.rowHeight(0)
                               + 2 * table.frameWidth() if rows else 0)
        total = self.splitter.width() if beside else self.splitter.height()
        if beside and not self._split_by_user and wanted > self.splitter.sizes()[1]:
            self.splitter.setSizes([total - wanted, wanted])

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._give_table_its_width()

    def figures(self) -> list[Figure]:
        if self.result is None:   # an empty strip is no figure
            return []
        return [Figure("occlusion_strip", self.strips, table=self.result.csv, page_size=self.page_size)]

    def page_size(self) -> QSize:
        """At most PAGE_WIDTH wide: as wide as the longest row of chips there (a short sentence makes a
        narrower page, not a wide white one), and as high as the strips, keys and caption need at that width.
        A row that fits at PAGE_WIDTH fits at its own width: the chips wrap the same way on the page."""
        pages.natural_height(self.strips, pages.PAGE_WIDTH)   # the chips flow at the page's width
        right = max(strip.x() + strip.chip_rect(i).right() for strip in (self.delta_strip, self.rollout_strip)
                    for i in range(strip.chip_count()))
        margin = self.strips.layout().contentsMargins().right() + CHIP_MARGIN
        width = min(pages.PAGE_WIDTH, max(MIN_PAGE_WIDTH, math.ceil(right + margin)))
        return QSize(width, pages.natural_height(self.strips, width))

    def why_no_figures(self) -> str:
        if self.result is None and self.error:
            return f"The occlusion sweep failed: {self.error}."
        if self.result is None and not self.showing_empty_state():
            return ("The occlusion sweep has not run: it runs when the Occlusion panel shows a sentence "
                    "(headless, `python main.py occlude` writes its numbers).")
        return super().why_no_figures()
