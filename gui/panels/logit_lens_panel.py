"""Logit lens: where in the model the next-token prediction forms.

core.logit_lens applies the final RMSNorm and the LM head to the residual stream at every stage
(the embedding, then after each layer's attention and after each whole layer). The heatmap has a
row per stage and a column per position: the colour is the probability of that stage's top token,
the label is the token. For the selected position the table lists each stage's top 5 and the rank
and probability of a target token (default: the model's own top token), and the line under it
names the stage from which the target stays on top.

The lens takes ~200 ms on a full context, so it is computed on the model worker (gui.readout_job):
the panel says "Computing…" until the lens of the trace it holds arrives; a newer trace supersedes it.
A target other than the model's own top token needs the position's [S, V] logits (0.3-1 s on a
150k vocabulary): that column goes to the worker too, the target's cells say "computing…" meanwhile.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QRectF, QSize
from PySide6.QtGui import QColor, QPainterPath
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel,
                               QSpinBox, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from core.logit_lens import STAGES_NOTE, TOP_K, LogitLens, formation_of, logit_lens, stage_label
from core.readouts import default_target
from core.trace import Trace
from gui import figure_pages as pages
from gui import plotting
from gui.fonts import ui_font
from gui.figure_frame import figure_frame, scrolling, show_every_row
from gui.heatmap import Heatmap, TokenCellText
from gui.panels.base import Figure, Panel
from gui.qt_signals import qt_signals_blocked
from gui.readout_job import ReadoutJob
from gui.theme import ink, page_ink

COMPUTING = "computing…"
TOP_TOKEN = -1                      # the target spin box's "the model's own top token"
MARK_COLOUR = QColor(214, 39, 40)
CLICK_HINT = "Click a column of the heatmap to select that position."
MIN_VIEW_HEIGHT = 200               # the heatmap's plot; the heatmap fills the panel's first screen above it


def format_probability(p: float) -> str:
    return f"{p:.1%}" if p >= 0.001 else f"{p * 100:.2g}%"


class LogitLensPanel(Panel):
    title = "Logit lens"
    object_name = "logit_lens"
    figure_names = dict.fromkeys(("logit_lens_heatmap", "logit_lens_position"), "")
    fields = ("embed", "resid_mid", "resid_post", "logits")   # every stage; the logits give the default target
    empty_text = "Type a sentence to see, stage by stage, what the model would predict if it stopped there."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.lens: LogitLens | None = None
        self.readout = ReadoutJob(self.refresh)   # the controller lends it the model worker
        self.target_job = self.readout.sibling()  # a target's ranks, when they need the [S, V] column
        self.position = 0
        self.target = 0
        self.set_content(self._build())
        self.refresh()

    # ---------------------------------------------------------------- building (once)
    def _build(self) -> QWidget:
        self.heatmap_title = QLabel(
            "Logit lens: the final RMSNorm and LM head applied to the residual stream after every stage. "
            f"Colour: probability of that stage's top token; label: the token. {STAGES_NOTE}")
        self.heatmap_title.setWordWrap(True)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setMinimumHeight(MIN_VIEW_HEIGHT)
        self.heatmap = Heatmap("position (the token read) →", "stage ↓")
        self.heatmap.setMouseEnabled(x=False, y=False)
        self.view.addItem(self.heatmap)
        self.view.addItem(pg.ColorBarItem(values=(0.0, 1.0), colorMap=plotting.colormap(), interactive=False,
                                          width=14, label="probability of the top token"))
        self.cell_labels = TokenCellText()
        self.heatmap.addItem(self.cell_labels)
        self.position_mark = self.heatmap.add_outline(MARK_COLOUR, 2.5)
        self.heatmap.sigCellClicked.connect(lambda stage, position: self.sigSelect.emit({"query": position}))
        self.heatmap.sigCellHovered.connect(self._on_cell_hovered)
        self.heatmap_box = figure_frame(self.heatmap_title, self.view, stretch=1)

        self.target_box = QSpinBox()
        self.target_box.setRange(TOP_TOKEN, 0)
        self.target_box.setSpecialValueText("top token")
        self.target_box.setValue(TOP_TOKEN)
        self.target_box.setToolTip("The token id whose rank and probability are followed across the stages")
        self.target_box.valueChanged.connect(self.refresh)
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Target token id:"))
        controls.addWidget(self.target_box)
        controls.addWidget(QLabel(CLICK_HINT))   # on screen only: the exported heatmap carries no instructions
        controls.addStretch(1)

        self.position_title = QLabel()
        self.position_title.setFont(ui_font(bold=True))
        self.position_title.setWordWrap(True)
        self.table = QTableWidget()
        columns = ["stage", *(f"top {i + 1}" for i in range(TOP_K)), "target rank", "target probability"]
        self.table.setColumnCount(len(columns))
        self.table.setHorizontalHeaderLabels(columns)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setToolTip("Click a token of the top 5 to follow it as the target")
        self.table.cellClicked.connect(self._on_table_clicked)
        self.formation = QLabel()
        self.formation.setWordWrap(True)
        self.position_box = figure_frame(self.position_title, self.table, self.formation, stretch=1)

        # The heatmap, its x labels included, fills the first screen of the page; the table is below it.
        self.heatmap_holder = QWidget()
        holder = QVBoxLayout(self.heatmap_holder)
        holder.setContentsMargins(0, 0, 0, 0)
        holder.addWidget(self.heatmap_box)
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.heatmap_holder, 1)
        layout.addLayout(controls)
        layout.addWidget(self.position_box)
        self.scroll = scrolling(page)
        self.scroll.viewport().installEventFilter(self)
        return self.scroll

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        """The page's first screen is the heatmap: the holder as tall as the scroll area's viewport (fixed:
        the area sizes a page by its preferred height; the holder's, not the figure's own size: an export
        lays the figure out at its page size)."""
        if watched is self.scroll.viewport() and event.type() == QEvent.Type.Resize:
            self.heatmap_holder.setFixedHeight(max(event.size().height(), MIN_VIEW_HEIGHT))
        return False

    # ---------------------------------------------------------------- drawing
    def clear(self) -> None:
        self.lens = None

    def unavailable(self, trace: Trace) -> str | None:
        if self.readout.result_for(logit_lens, trace) is None:
            return self.readout.waiting_text("the logit lens of this sentence")
        return None

    def draw(self) -> None:
        trace = self.trace
        lens = self.readout.result_for(logit_lens, trace)
        if lens is not self.lens:
            self.lens = lens
            self._draw_heatmap()
        self.position = self.selection.query_index(trace.n_tokens)
        with qt_signals_blocked(self.target_box):
            self.target_box.setMaximum(trace.config.vocab_size - 1)
        chosen = self.target_box.value()
        self.target = default_target(trace, self.position) if chosen == TOP_TOKEN else chosen
        self.position_mark.setPath(_column_path(self.position, len(self.lens.stage_names)))
        self._draw_position()

    def _draw_heatmap(self) -> None:
        top_ids = self.lens.top_ids[..., 0]                       # [S, T]
        top_probs = self.lens.top_probs[..., 0]                   # [S, T]
        self.heatmap.set_rgba(plotting.masked_rgba(top_probs, (0.0, 1.0), plotting.colormap()))
        self.heatmap.set_row_labels([stage_label(name) for name in self.lens.stage_names], columns=None)
        self.heatmap.set_col_labels(self.trace.labels())
        self.cell_labels.set_labels([[self.trace.vocab_label(int(i)) for i in row] for row in top_ids], top_probs)

    def _draw_position(self) -> None:
        trace, lens, position, target = self.trace, self.lens, self.position, self.target
        ids, probs = lens.top_k(position)
        followed = self.target_readout()
        self.position_title.setText(
            f"After “{trace.label(position)}” (position {position}): the top {TOP_K} of every stage, and "
            f"the target “{trace.vocab_label(target)}” (id {target})")
        self.table.setRowCount(len(lens.stage_names))
        for s, name in enumerate(lens.stage_names):
            cells = [stage_label(name)]
            cells += [f"{trace.vocab_label(int(i))}  {format_probability(float(p))}" for i, p in zip(ids[s], probs[s])]
            cells += ([COMPUTING, COMPUTING] if followed is None else
                      [str(int(followed[0][s])), format_probability(float(followed[1][s]))])
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if 1 <= column <= TOP_K and int(ids[s, column - 1]) == target:
                    item.setBackground(ink("#fff1b8", "#6b5a1a"))   # the target among the top 5
                    item.setForeground(page_ink())
                self.table.setItem(s, column, item)
        show_every_row(self.table)
        self.formation.setText(self._formation_text(followed))

    def target_readout(self, now: bool = False) -> tuple[np.ndarray, np.ndarray] | None:  # -> rank [S], prob [S]
        """The target's rank and probability at every stage; None while its column is computed on the worker
        (`now`: on this thread, for an export)."""
        lens, position, target = self.lens, self.position, self.target
        if not lens.needs_column(position, target):
            return lens.target_ranks(position, target)
        ask = self.target_job.result_now if now else self.target_job.result_for
        return ask(LogitLens.target_ranks, lens, position, target)

    def _formation_text(self, followed: tuple[np.ndarray, np.ndarray] | None) -> str:
        token = f"“{self.trace.vocab_label(self.target)}”"
        if followed is None:
            return f"Ranking {token} at every stage: {COMPUTING}"
        stage = formation_of(followed[0])
        if stage is None:
            return f"{token} is not the model's top token here, so it never forms as the prediction."
        if stage == 0:
            return f"{token} is the top token from the embedding on: no layer changes the winner."
        return (f"{token} becomes the top token at “{stage_label(self.lens.stage_names[stage])}” "
                f"and stays on top to the end: that is where the prediction forms.")

    # ---------------------------------------------------------------- user input
    def cell_text(self, stage: int, position: int) -> str:
        """What a cell stands for, in words (its label may be elided or, in small cells, not drawn)."""
        top, p = int(self.lens.top_ids[stage, position, 0]), float(self.lens.top_probs[stage, position, 0])
        return (f"{stage_label(self.lens.stage_names[stage])}, after “{self.trace.label(position)}” "
                f"(position {position}): top token “{self.trace.vocab_label(top)}” {format_probability(p)}")

    def _on_table_clicked(self, stage: int, column: int) -> None:
        """A top-5 token becomes the target (the spin box redraws)."""
        if self.lens is not None and 1 <= column <= TOP_K:
            ids, _ = self.lens.top_k(self.position)
            self.target_box.setValue(int(ids[stage, column - 1]))

    def _on_cell_hovered(self, cell) -> None:
        self.view.setToolTip("" if cell is None or self.lens is None else self.cell_text(*cell))

    # ---------------------------------------------------------------- export
    def figures(self) -> list[Figure]:
        if self.trace is not None and self.lens is None:   # an export right after a new sentence: no waiting
            self.readout.result_now(logit_lens, self.trace)
            self.refresh()
        if self.lens is not None and self.target_readout() is None:   # nor for the target's column
            self.target_readout(now=True)
            self.refresh()
        if self.lens is None:
            return []
        return [Figure("logit_lens_heatmap", self.heatmap_box, table=self.heatmap_csv, page_size=self.heatmap_page),
                Figure("logit_lens_position", self.position_box, table=self.position_csv,
                       extra_tables={"logit_lens_target": self.target_csv})]

    def heatmap_page(self) -> QSize:
        """Cells wide enough for their token while the sentence is short (44 px), a row per stage."""
        stages, tokens = len(self.lens.stage_names), self.trace.n_tokens
        return pages.cells_page(self.heatmap_box, self.heatmap.vb, stages, tokens,
                                pages.matrix_cell(stages, tokens, widest=44.0, tallest=34.0))

    def heatmap_csv(self) -> str:
        return self.lens.tops_csv(self.trace)

    def position_csv(self) -> str:
        return self.lens.position_csv(self.trace, self.position)

    def target_csv(self) -> str:
        return self.lens.target_csv(self.trace, self.position, self.target, *self.target_readout(now=True))


def _column_path(column: int, rows: int) -> QPainterPath:
    path = QPainterPath()
    path.addRect(QRectF(column, 0, 1, rows))
    return path

