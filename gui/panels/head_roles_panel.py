"""Head roles: what each attention head does, as a sortable table of scores and the cells behind one.

Every number comes from core.head_roles: the scores on the sentence from the Trace, the scores on
the bundle's fixed probe (repeated random tokens, as `main.py eval` uses) from the controller, which
runs the model once per bundle when this panel asks (sigRequestProbe -> set_probe). Clicking a score
selects that head everywhere and outlines, on the head's attention heatmap below, the cells the
score is made of.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSizeF, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QLabel, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from core.head_roles import (ROLE_DEFINITIONS, ROLE_NAMES, ROLE_SOURCES, HeadRoles, evidence_csv, roles_csv,
                             sentence_roles)
from core.role_badges import BADGES
from core.trace import Trace
from gui import plotting
from gui.fonts import ui_font
from gui.figure_frame import figure_frame, scrolling, show_every_row
from gui.heatmap import Heatmap, cells_path
from gui import figure_pages as pages
from gui.panels.base import Figure, Panel
from gui.theme import ink, readable_on, tint

SCORE_COLOUR = QColor("#2c5f8a")      # a full-score cell; 0 is the paper
EVIDENCE_PEN = QColor("#ff5a1f")      # outline of the cells a score is made of
ROLE_TITLES = {"previous_token": "previous", "self": "self", "first_token": "first (sink)",
               "duplicate_token": "duplicate", "induction": "induction"}
SOURCE_TITLES = {"sentence": "sent.", "probe": "probe"}   # under the role's badge name in a column title
HEADER_PADDING = 12   # a column is never narrower than its title (the titles were cut to "nduction")


def head_name(layer: int, head: int) -> str:
    return f"L{layer}.H{head}"


def format_score(score: float) -> str:
    return "—" if np.isnan(score) else f"{score:.2f}"


def score_background(score: float) -> QColor:
    """The paper (0) to SCORE_COLOUR (1), on the dark theme's paper a lighter blue; an undefined score
    stays the paper."""
    t = 0.0 if np.isnan(score) else float(np.clip(score, 0.0, 1.0))
    return tint(ink(SCORE_COLOUR.name(), "#5b9bd5"), t)


class ScoreItem(QTableWidgetItem):
    """A table cell that sorts by its number (undefined last), not by its text."""

    def __init__(self, text: str, value: float) -> None:
        super().__init__(text)
        self.value = value

    def __lt__(self, other: QTableWidgetItem) -> bool:
        mine, theirs = self.value, getattr(other, "value", np.nan)
        if np.isnan(mine) or np.isnan(theirs):
            return not np.isnan(mine) and np.isnan(theirs)
        return mine < theirs


class HeadRolesPanel(Panel):
    title = "Head roles"
    object_name = "head_roles"
    figure_names = dict.fromkeys(("head_roles_table", "head_roles_evidence"), "")
    fields = ("attn",)   # every head's role scores on the sentence
    empty_text = "Type a sentence to score what each head does."

    sigRequestProbe = Signal()   # the controller answers set_probe(HeadRoles) for the current bundle

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.roles: HeadRoles | None = None          # scores on the sentence
        self._roles_trace: Trace | None = None       # the trace they were scored on
        self.probe: HeadRoles | None = None          # scores on the bundle's probe
        self._probe_model = None                     # the model the probe was asked for (see _model_of)
        self._table_shows: tuple | None = None       # (roles, probe) the table was filled from
        self.role = "previous_token"                 # the role whose cells are outlined
        self.source = "sentence"

        self.header = QLabel()
        self.header.setWordWrap(True)
        self.table = QTableWidget()
        self.definitions = QLabel()
        self.evidence_title = QLabel()
        self.evidence_view = pg.GraphicsLayoutWidget()
        self.evidence_view.setMinimumHeight(300)
        self._build_table()
        self._build_evidence()
        self.table_box = figure_frame(self.table, self.definitions, stretch=0)       # the table figure
        self.evidence_box = figure_frame(self.evidence_title, self.evidence_view, stretch=1)

        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.header)
        layout.addWidget(self.table_box)
        layout.addWidget(self.evidence_box, 1)
        self.set_content(scrolling(page))
        self.refresh()

    # ---------------------------------------------------------------- building (once)
    def _build_table(self) -> None:
        # Short titles (the grid's badge names), so that eleven columns fit a dock of a small screen.
        columns = ["head"] + [f"{BADGES[role]}\n{SOURCE_TITLES[source]}"
                              for role in ROLE_NAMES for source in ROLE_SOURCES]
        self.table.setColumnCount(len(columns))
        self.table.setHorizontalHeaderLabels(columns)
        for i, role in enumerate(ROLE_NAMES):
            for j, source in enumerate(ROLE_SOURCES):
                self.table.horizontalHeaderItem(1 + 2 * i + j).setToolTip(
                    f"{ROLE_TITLES[role]}: {ROLE_DEFINITIONS[role]}\n"
                    f"({'on this sentence' if source == 'sentence' else 'on the probe'})")
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        metrics = header.fontMetrics()
        header.setMinimumSectionSize(HEADER_PADDING + max(metrics.horizontalAdvance(line) for title in columns
                                                          for line in title.split("\n")))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectItems)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setSortingEnabled(True)
        self.table.cellClicked.connect(self._on_cell_clicked)
        self.definitions.setWordWrap(True)
        self.definitions.setTextFormat(Qt.TextFormat.RichText)
        self.definitions.setText("<br>".join(f"<b>{BADGES[role]}</b> ({ROLE_TITLES[role]}): {ROLE_DEFINITIONS[role]}"
                                             for role in ROLE_NAMES)
                                 + "<br><b>sent.</b>: on this sentence; <b>probe</b>: the same scores on the "
                                   "bundle's fixed probe, random tokens repeated (as <i>main.py eval</i> measures "
                                   "induction), averaged over its sequences.")

    def _build_evidence(self) -> None:
        self.evidence_title.setWordWrap(True)
        self.evidence_title.setFont(ui_font(bold=True))
        self.evidence = Heatmap("key token (attended to) →", "query token (attending) ↓")
        self.evidence.setMouseEnabled(x=False, y=False)
        self.evidence_view.addItem(self.evidence)
        self.evidence_outline = self.evidence.add_outline(EVIDENCE_PEN, 2)
        self.evidence.sigCellClicked.connect(
            lambda query, key: self.sigSelect.emit({"query": query, "key": key if key <= query else None}))

    # ---------------------------------------------------------------- the probe (from the controller)
    @staticmethod
    def _model_of(trace: Trace):
        """One weight array of the trace's bundle: the same object for every trace of that bundle."""
        return trace.weights.get("model.norm.weight")

    def _ask_for_probe(self) -> None:
        model = self._model_of(self.trace)
        if model is not None and model is not self._probe_model:
            self._probe_model, self.probe = model, None
            self.sigRequestProbe.emit()

    def set_probe(self, probe: HeadRoles) -> None:
        """The controller's answer: role scores on the current bundle's probe."""
        self.probe = probe
        self.refresh()

    # ---------------------------------------------------------------- drawing
    def clear(self) -> None:
        self.roles, self._roles_trace, self._table_shows = None, None, None

    def draw(self) -> None:
        self._ask_for_probe()
        if self._roles_trace is not self.trace:   # a selection change keeps the scores
            self.roles, self._roles_trace = sentence_roles(self.trace), self.trace
        self.header.setText(self._header_text())
        if not _same(self._table_shows, (self.roles, self.probe)):
            self._fill_table()
        self._mark_selected_head()
        self._draw_evidence()

    def _header_text(self) -> str:
        probe = "" if self.probe is not None else " The probe column fills in once the model has run it."
        return ("What each head does: the share of its attention on the cells of each role (1 = nothing else). "
                "Click a score to select the head and outline its cells below; click a column title to sort."
                + probe)

    def _fill_table(self) -> None:
        scores = self.roles.scores
        layers, heads = scores.shape[:2]
        self.table.setSortingEnabled(False)   # filling a sorted table moves rows under the loop
        self.table.setRowCount(layers * heads)
        for row, (layer, head) in enumerate(np.ndindex(layers, heads)):
            name = ScoreItem(head_name(layer, head), layer * heads + head)
            name.setData(Qt.ItemDataRole.UserRole, (layer, head, None, None))
            self.table.setItem(row, 0, name)
            for i, role in enumerate(ROLE_NAMES):
                for j, source in enumerate(ROLE_SOURCES):
                    self.table.setItem(row, 1 + 2 * i + j, self._score_item(layer, head, role, source))
        self.table.setSortingEnabled(True)
        show_every_row(self.table)
        self._table_shows = (self.roles, self.probe)

    def _mark_selected_head(self) -> None:
        """The selected head's row in bold, wherever sorting put it."""
        chosen = (self.selection.layer, self.selection.head)
        for row in range(self.table.rowCount()):
            bold = tuple(self.table.item(row, 0).data(Qt.ItemDataRole.UserRole)[:2]) == chosen
            for column in range(self.table.columnCount()):
                item = self.table.item(row, column)
                font = item.font()
                font.setBold(bold)
                item.setFont(font)

    def _score_item(self, layer: int, head: int, role: str, source: str) -> ScoreItem:
        roles = self.roles if source == "sentence" else self.probe
        score = np.nan if roles is None else roles.score(layer, head, role)
        item = ScoreItem(format_score(score) if roles is not None else "…", score)
        item.setData(Qt.ItemDataRole.UserRole, (layer, head, role, source))
        item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
        item.setBackground(score_background(score))
        item.setForeground(readable_on(item.background().color()))
        if roles is not None and np.isnan(score):
            item.setToolTip(f"undefined on the {source}: {roles.evidence[role].reason}")
        return item

    def _draw_evidence(self) -> None:
        layer, head = self.selection.layer, self.selection.head
        attn = self.trace.layers[layer].attn[head]          # [T, T]
        masked = np.triu(np.ones(attn.shape, dtype=bool), k=1)
        self.evidence.set_rgba(plotting.masked_rgba(attn, (0.0, 1.0), plotting.colormap(), masked))
        self.evidence.set_row_labels(self.trace.labels())
        self.evidence.set_col_labels(self.trace.labels())
        evidence = self.roles.evidence[self.role]
        self.evidence_outline.setPath(cells_path(zip(evidence.queries.tolist(), evidence.keys.tolist())))
        self.evidence_title.setText(self._evidence_text(layer, head))

    def _evidence_text(self, layer: int, head: int) -> str:
        evidence = self.roles.evidence[self.role]
        name = f"{head_name(layer, head)} · {ROLE_TITLES[self.role]}"
        if not evidence.defined:
            return f"{name}: undefined on this sentence ({evidence.reason})."
        score = self.roles.score(layer, head, self.role)
        text = (f"{name} = {score:.2f} on this sentence: the attention in the outlined cells, summed per query "
                f"and averaged over {evidence.n_queries} queries.")
        if self.source == "probe" and self.probe is not None:
            text += (f" On the probe it scores {format_score(self.probe.score(layer, head, self.role))}; "
                     "the cells shown are this sentence's.")
        return text

    # ---------------------------------------------------------------- user input
    def _on_cell_clicked(self, row: int, column: int) -> None:
        layer, head, role, source = self.table.item(row, column).data(Qt.ItemDataRole.UserRole)
        if role is not None:
            self.role, self.source = role, source
        self.sigSelect.emit({"layer": int(layer), "head": int(head)})

    # ---------------------------------------------------------------- export
    def figures(self) -> list[Figure]:
        if self.roles is None:
            return []
        n = self.trace.n_tokens
        return [Figure("head_roles_table", self.table_box, table=self.table_csv),
                Figure("head_roles_evidence", self.evidence_box, table=self.evidence_csv,
                       page_size=lambda: pages.cells_page(self.evidence_box, self.evidence.vb, n, n,
                                                          QSizeF(pages.cell_size(n), pages.cell_size(n))))]

    def table_csv(self) -> str:
        return roles_csv(self.roles, self.probe)

    def evidence_csv(self) -> str:
        layer, head = self.selection.layer, self.selection.head
        return evidence_csv(self.trace, self.roles.evidence[self.role], layer, head, self.role)


def _same(drawn: tuple | None, now: tuple) -> bool:
    """Whether what was drawn came from these very objects (identity: their arrays have no single ==)."""
    return drawn is not None and all(a is b for a, b in zip(drawn, now))
