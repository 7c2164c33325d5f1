"""Parity: the evidence that the pictures are the model's real computation.

With Model → Both backends the controller runs the sentence through ONNX Runtime and the NumPy
reference and hands this panel the NumPy trace (set_reference_trace) before the ONNX one
(set_trace). core.parity_report compares them field by field: the table has a row per Trace
field and a column per layer, each cell the field's largest |ONNX − NumPy|, coloured by how close
its worst cell comes to the tolerance; the line under it locates the worst cell of all. Clicking a
cell shows that field's differences as a heatmap (one head of the selected ones for [H, T, ·] fields).

The report takes ~250 ms on a full context, so it is computed on the model worker (gui.readout_job):
the panel says "Computing…" until the report of the pair it holds arrives; a newer pair supersedes it.
The clicked field's heatmap (the logits are T x V cells) is made there too, a newer click superseding.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QAbstractScrollArea, QHeaderView, QLabel, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from core.parity_report import (DifferenceMap, ParityRow, axis_names, difference_array, difference_map,
                                first_routing_difference, parity_report, tolerance)
from core.raw_export import csv_text
from core.trace import LAYER_FIELDS, Trace
from gui import plotting
from gui.fonts import ui_font
from gui.figure_frame import figure_frame, scrolling, show_every_row
from gui.heatmap import Heatmap, cells_path
from gui.panels.base import Figure, Panel
from gui.readout_job import ReadoutJob
from gui.theme import readable_on, tint

NEED_BOTH = ("Parity compares the ONNX Runtime run with the NumPy reference run of the same sentence, so it "
             "needs both: pick Model → Both backends (ONNX ↔ NumPy parity).")
MODEL_FIELDS_ROWS = ("embed", "final_norm", "logits")   # one value each, not per layer
WITHIN, OUTSIDE = QColor("#f2b134"), QColor("#d62728")
MARK_COLOUR = QColor(214, 39, 40)
DIFF_FLOOR = 1e-12          # |Δ| = 0 is drawn at this level of the log scale


def difference_picture(numpy_trace: Trace, onnx_trace: Trace, field: str,
                       head: int | None) -> tuple[DifferenceMap, np.ndarray]:  # -> map, rgba [T, X, 4]
    """The heatmap's numbers and colours, made on the model worker."""
    picture = difference_map(numpy_trace, onnx_trace, field, head, DIFF_FLOOR)
    causal = np.triu(np.ones(picture.matrix.shape, dtype=bool), k=1) if axis_names(field)[-1] == "key" else None
    return picture, plotting.masked_rgba(picture.logs, picture.levels, plotting.colormap(), causal)


def ratio_colour(ratio: float) -> QColor:
    """The share of the tolerance used, linearly: the paper (white, or the dark theme's) for none, amber
    for all of it, red past it. (A log scale made 8 % of the tolerance look "at it".)"""
    if ratio > 1.0:
        return OUTSIDE
    return tint(WITHIN, max(ratio, 0.0))


def row_tooltip(row: ParityRow) -> str:
    tol = tolerance(row.field)
    return (f"{row.field}: largest |ONNX − NumPy| {row.max_abs:.3g}\n"
            f"worst against its tolerance at {row.location()}: |Δ| {row.worst_diff:.3g} of "
            f"{row.worst_tolerance:.3g} allowed ({row.ratio:.2g}×)\n"
            f"NumPy {row.numpy_value:.9g}, ONNX {row.onnx_value:.9g}\n"
            f"tolerance (core.parity_report): {tol.atol:g} + {tol.rtol:g} × the field's largest |value|")


class ParityPanel(Panel):
    title = "Parity"
    object_name = "parity"
    figure_names = dict.fromkeys(("parity_fields", "parity_diff"), "in the app with both backends on (Model → Both)")
    empty_text = "Type a sentence to compare ONNX Runtime with the NumPy reference, field by field."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.reference: Trace | None = None          # the other backend's trace of the same sentence
        self.rows: list[ParityRow] = []
        self._report_of: tuple | None = None         # (trace, reference) the rows were computed from
        self.field: str | None = None                # the field whose differences the heatmap shows
        self._drawn_diff: tuple | None = None        # (report, field, head) the heatmap shows
        self.readout = ReadoutJob(self.refresh)       # the controller lends it the model worker
        self.diff_job = self.readout.sibling()        # the clicked field's heatmap
        self.set_content(self._build())
        self.refresh()

    # ---------------------------------------------------------------- building (once)
    def _build(self) -> QWidget:
        self.need_both = QLabel(NEED_BOTH)
        self.need_both.setObjectName("need_both")
        self.need_both.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.need_both.setWordWrap(True)

        self.summary = QLabel()
        self.summary.setFont(ui_font(bold=True))
        self.summary.setWordWrap(True)
        self.table = QTableWidget()
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setSizeAdjustPolicy(QAbstractScrollArea.SizeAdjustPolicy.AdjustToContents)
        self.table.cellClicked.connect(self._on_cell_clicked)
        self.worst = QLabel()
        self.worst.setWordWrap(True)
        legend = QLabel(f"Each cell: the field's largest |ONNX − NumPy|. Colour: how much of its tolerance the "
                        f"field's worst cell uses — white none, paler to "
                        f"<span style='color:{WITHIN.name()}'>■</span> all of it, "
                        f"<span style='color:{OUTSIDE.name()}'>■</span> more (outside).")
        legend.setTextFormat(Qt.TextFormat.RichText)
        legend.setWordWrap(True)
        self.fields_box = figure_frame(self.summary, self.table, self.worst, legend)
        self.click_hint = QLabel("Click a cell of the table for that field's heatmap.")   # on screen, not in the figure

        self.diff_title = QLabel()
        self.diff_title.setWordWrap(True)
        self.diff_view = pg.GraphicsLayoutWidget()
        self.diff_view.setMinimumHeight(320)
        self.diff_map = Heatmap("", "token ↓")
        self.diff_map.setMouseEnabled(x=False, y=False)
        self.diff_view.addItem(self.diff_map)
        self.diff_bar = pg.ColorBarItem(values=(-12.0, 0.0), colorMap=plotting.colormap(), interactive=False,
                                        width=14, label="log10 |ONNX − NumPy|")
        self.diff_view.addItem(self.diff_bar)
        self.worst_mark = self.diff_map.add_outline(MARK_COLOUR, 2.5)
        self.diff_map.sigCellClicked.connect(lambda row, col: self.sigSelect.emit({"query": row}))
        self.diff_box = figure_frame(self.diff_title, self.diff_view, stretch=1)

        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.need_both, 1)
        layout.addWidget(self.fields_box)
        layout.addWidget(self.click_hint)
        layout.addWidget(self.diff_box, 1)
        return scrolling(page)

    # ---------------------------------------------------------------- the other backend's trace
    def set_reference_trace(self, reference: Trace | None) -> None:
        """The NumPy trace of a "both" run (None otherwise); it comes just before set_trace, which redraws."""
        self.reference = reference

    def traces_by_backend(self) -> tuple[Trace, Trace] | None:
        """(numpy_trace, onnx_trace) when the panel holds one of each, of the same ids; else None."""
        if self.trace is None or self.reference is None:
            return None
        pair = {t.backend: t for t in (self.trace, self.reference)}
        if set(pair) != {"numpy", "onnx"} or not np.array_equal(self.trace.input_ids, self.reference.input_ids):
            return None
        return pair["numpy"], pair["onnx"]

    # ---------------------------------------------------------------- drawing
    def clear(self) -> None:
        self.rows, self._report_of, self.field, self._drawn_diff = [], None, None, None

    def unavailable(self, trace: Trace) -> str | None:
        pair = self.traces_by_backend()
        if pair is not None and self.readout.result_for(parity_report, *pair) is None:
            return self.readout.waiting_text("the parity report of this sentence")
        return None   # without a pair draw() says to pick both backends

    def draw(self) -> None:
        pair = self.traces_by_backend()
        self.need_both.setVisible(pair is None)
        for box in (self.fields_box, self.click_hint, self.diff_box):
            box.setVisible(pair is not None)
        if pair is None:
            self.clear()
            return
        if self._report_of is None or any(a is not b for a, b in zip(self._report_of, pair)):
            self.rows, self._report_of = self.readout.result_for(parity_report, *pair), pair
            self.field = max(self.rows, key=lambda row: row.ratio).field
            self._fill_table()
        self._mark_field()
        self._draw_diff()

    def _mark_field(self) -> None:
        """The field the heatmap shows in bold."""
        for r in range(self.table.rowCount()):
            for c in range(1, self.table.columnCount()):
                item = self.table.item(r, c)
                if item is not None:
                    font = item.font()
                    font.setBold(item.data(Qt.ItemDataRole.UserRole) == self.field)
                    item.setFont(font)

    def _fill_table(self) -> None:
        layers = self.trace.num_layers
        names = [MODEL_FIELDS_ROWS[0], *(name for name, _, _ in LAYER_FIELDS), *MODEL_FIELDS_ROWS[1:]]
        self.table.clear()
        self.table.setColumnCount(1 + layers)
        self.table.setHorizontalHeaderLabels(["field", *(f"layer {l}" for l in range(layers))])
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.setRowCount(len(names))
        for r, name in enumerate(names):
            self.table.setItem(r, 0, QTableWidgetItem(name))
            if name in MODEL_FIELDS_ROWS:
                self.table.setSpan(r, 1, 1, layers)
        for row in self.rows:
            r = names.index(row.field.split(".")[-1])
            item = QTableWidgetItem(f"{row.max_abs:.1e}")
            item.setData(Qt.ItemDataRole.UserRole, row.field)
            item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
            item.setBackground(ratio_colour(row.ratio))
            item.setForeground(readable_on(item.background().color()))
            item.setToolTip(row_tooltip(row))
            self.table.setItem(r, 1 + (row.layer or 0), item)
        show_every_row(self.table)
        self.summary.setText(self._summary_text())
        self.worst.setText(self._worst_text())

    def _summary_text(self) -> str:
        failing = [row for row in self.rows if not row.ok]
        worst = max(row.max_abs for row in self.rows)
        verdict = (f"all {len(self.rows)} fields within tolerance" if not failing
                   else f"{len(failing)} of {len(self.rows)} fields outside their tolerance")
        return f"ONNX Runtime ↔ NumPy reference on {self.trace.n_tokens} tokens: {verdict}; largest |Δ| {worst:.2e}."

    def _worst_text(self) -> str:
        row = max(self.rows, key=lambda r: r.ratio)
        text = (f"Closest to its tolerance: {row.field} at {row.location()} — NumPy {row.numpy_value:.7g}, "
                f"ONNX {row.onnx_value:.7g}, |Δ| {row.worst_diff:.2e} of {row.worst_tolerance:.2e} allowed.")
        routing = first_routing_difference(*self._report_of)
        if routing is not None:
            text += (f" The backends route token {routing[1]} to different experts in layer {routing[0]} "
                     "(a near tie): later fields at that token differ for that reason, not from rounding.")
        return text

    def _draw_diff(self, now: bool = False) -> None:
        """The selected field's heatmap, made on the worker (`now`: on this thread, for an export)."""
        axes = axis_names(self.field)
        head = self.selection.head if axes[0] == "head" else None
        drawn = (self._report_of, self.field, head)
        if self._drawn_diff is not None and self._drawn_diff[0] is drawn[0] and self._drawn_diff[1:] == drawn[1:]:
            return   # a selection change that does not touch this picture (the logits are 256 x V cells)
        ask = self.diff_job.result_now if now else self.diff_job.result_for
        made = ask(difference_picture, *self._report_of, self.field, head)
        where = "" if head is None else f", head {head}"
        if made is None:
            self.diff_title.setText(self.diff_job.waiting_text(f"the differences of {self.field}{where}"))
            return
        self._drawn_diff = drawn
        picture, rgba = made
        self.diff_map.set_rgba(rgba)
        self.diff_bar.setLevels(picture.levels)
        self.diff_map.set_row_labels(self.trace.labels())
        self.diff_map.setLabel("bottom", f"{axes[-1]} →")
        self.diff_map.set_col_labels(self.trace.labels() if axes[-1] == "key" else
                                     [str(i) for i in range(picture.matrix.shape[1])])
        self.worst_mark.setPath(cells_path([picture.worst]))
        self.diff_title.setText(f"|ONNX − NumPy| of {self.field}{where}: rows are tokens, columns the "
                                f"{axes[-1]}; the outlined cell is this picture's largest difference "
                                f"({picture.worst_diff:.2e}).")

    # ---------------------------------------------------------------- user input
    def _on_cell_clicked(self, row: int, column: int) -> None:
        item = self.table.item(row, column)
        field = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if field:
            self.field = field
            layer = int(field.split(".")[1]) if field.startswith("layers.") else None
            if layer is not None and layer != self.selection.layer:
                self.sigSelect.emit({"layer": layer})   # the selection comes back and redraws
            else:
                self._mark_field()
                self._draw_diff()

    # ---------------------------------------------------------------- export
    def figures(self) -> list[Figure]:
        pair = self.traces_by_backend()
        if pair is not None and not self.rows:   # an export right after a new sentence: no waiting
            self.readout.result_now(parity_report, *pair)
            self.refresh()
        if self.rows:
            self._draw_diff(now=True)   # the clicked field's heatmap, if still on the worker
        if not self.rows:
            return []
        return [Figure("parity_fields", self.fields_box, table=self.fields_csv),
                Figure("parity_diff", self.diff_box, table=self.diff_csv)]

    def fields_csv(self) -> str:
        """One row per field and layer: the largest difference, the worst cell against the tolerance."""
        rows: list[tuple] = [("field", "layer", "max_abs_diff", "worst_ratio", "ok", "worst_cell", "worst_diff",
                              "worst_tolerance", "numpy_value", "onnx_value")]
        for row in self.rows:
            rows.append((row.field, "" if row.layer is None else row.layer, repr(row.max_abs), repr(row.ratio),
                         "true" if row.ok else "false", row.location(), repr(row.worst_diff),
                         repr(row.worst_tolerance), repr(row.numpy_value), repr(row.onnx_value)))
        return csv_text(rows)

    def diff_csv(self) -> str:
        """Every |ONNX − NumPy| of the selected field, one row per cell with its indices named."""
        diff = difference_array(*self._report_of, self.field)
        axes = axis_names(self.field)
        rows: list[tuple] = [("field", *axes, "abs_diff")]
        for index in np.ndindex(diff.shape):
            rows.append((self.field, *index, repr(float(diff[index]))))
        return csv_text(rows)

