"""Step by step: a hand calculation of one attention head, on this run's numbers.

A vertical scroll of cards, one per stage (core.steps): title, formula, a compact numeric
table of the selected rows and columns (3 significant digits; full precision on hover) and
a small heatmap of the whole matrix with the shown window marked. After ÷√Dh, one card
writes the selected query·key dot product out term by term.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from PySide6.QtCore import QCoreApplication, QModelIndex
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from core.raw_export import csv_text
from core.steps import DotProduct, HeadCalculation, Step, head_calculation, step_file_stem
from core.trace_fields import LAYER_NAMES, layer_input, of_layer
from gui.theme import page_background
from gui.panels.base import Figure, Panel
from gui.qt_signals import qt_signals_blocked
from gui.step_cards import Card, StepOverview, fill, format_value, label
from gui.text_fit import elide

DOT_AFTER, DOT_KEY = "scaled", "dot"  # the dot-product card follows the ÷√Dh card
DOT_TITLE = "The dot product behind one score, term by term"


def go_to_entries(steps: Sequence[Step]) -> list[tuple[str, str]]:
    """(label, card key) of every card, in page order: the numbered steps and, after ÷√Dh, the dot product."""
    entries = []
    for number, step in enumerate(steps, start=1):
        entries.append((f"{number}. {step.title}", step.key))
        if step.key == DOT_AFTER:
            entries.append((f"{number}+ {DOT_TITLE}", DOT_KEY))
    return entries


def dot_product_table(dot: DotProduct) -> tuple[np.ndarray, list[str], list[str]]:
    """Rows d0…d(Dh−1), then Σ, ÷√Dh, and the trace's score; columns q, k, q×k, running sum (NaN = blank)."""
    n = dot.terms.shape[0]
    blank = np.full((3, 4), np.nan)
    blank[0, 2], blank[1, 2], blank[2, 2] = dot.total, dot.score, dot.trace_score
    body = np.column_stack([dot.q, dot.k, dot.terms, np.cumsum(dot.terms)])
    rows = [f"d{d}" for d in range(n)] + ["Σ", f"÷ √{n}", "in the trace"]
    cols = [f"q_rot[{dot.query}]", f"k_rot[{dot.key}]", "q × k", "running Σ"]
    return np.vstack([body, blank]), rows, cols


class StepPanel(Panel):
    title = "Step by step"
    object_name = "step"
    figure_names = dict.fromkeys(("step_by_step", "step_NN_KEY", "step_dot_product"), "")   # core.steps.step_file_stem

    @property
    def fields(self) -> tuple[str, ...]:   # the selected layer's every field and what enters it
        return of_layer(self.selection.layer, LAYER_NAMES) + layer_input(self.selection.layer)
    empty_text = ("No sentence yet. Type one above to see one attention head computed step by step, "
                  "with this run's real numbers.")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.calculation: HeadCalculation | None = None
        self._cards_stale = False
        self._combo_items: dict[str, tuple] = {}
        self._cards: dict[str, Card] = {}
        self._combos = {name: QComboBox() for name in ("layer", "head", "query", "key")}
        controls = QHBoxLayout()
        for name, combo in self._combos.items():
            combo.setSizeAdjustPolicy(QComboBox.AdjustToContents)
            combo.setMaximumWidth(220)
            combo.activated.connect(lambda index, name=name: self._choose(name, index))
            controls.addWidget(QLabel(name.capitalize()))
            controls.addWidget(combo)
        controls.addStretch(1)
        self.step_index = QComboBox()
        self.step_index.setToolTip("Jump to a step of the calculation")
        self.step_index.activated.connect(self._jump_to_step)
        controls.addWidget(QLabel("Go to"))
        controls.addWidget(self.step_index)
        self.summary = label(9)
        self._strip = QWidget()            # every card: what the step_by_step figure renders
        self._strip.setObjectName("step_strip")
        fill(self._strip, page_background().darker(104))
        self._strip_layout = QVBoxLayout(self._strip)
        self._strip_layout.setContentsMargins(8, 8, 8, 8)
        self._strip_layout.setSpacing(8)
        self._strip_layout.addStretch(1)
        self.dot_card = Card()             # the term-by-term expansion, placed after the ÷√Dh card
        self.dot_card.setToolTip("Pick the key above, or click a cell of Q·Kᵀ, to write out another score")
        self.overview = StepOverview()     # the step_by_step figure: off screen, drawn only for export
        scroll = self._scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self._strip)
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(controls)
        layout.addWidget(self.summary)
        layout.addWidget(scroll, 1)
        self.set_content(page)
        self.refresh()

    # ------------------------------------------------------------ selection in, selection out
    def _choose(self, name: str, index: int) -> None:
        self.sigSelect.emit({name: index})

    def _cell_clicked(self, card: Card, index: QModelIndex) -> None:
        """Clicking a number selects its token(s): a query row, a key column."""
        step = next(s for s in self.calculation.steps if self._cards[s.key] is card) if self.calculation else None
        if step is None:
            return
        r, c = card.model.source_index(index)
        change = {}
        if r is not None:
            change["key" if step.row_axis == "keys" else "query"] = r
        if c is not None and step.col_axis == "keys":
            change["key"] = c
        if "query" in change and "key" in change and change["key"] > change["query"]:
            change.pop("key")  # a future key is masked: nothing to expand
        if change:
            self.sigSelect.emit(change)

    def _jump_to_step(self, index: int) -> None:
        entries = go_to_entries(self.calculation.steps) if self.calculation is not None else []
        if 0 <= index < len(entries):
            self._draw_cards()
            key = entries[index][1]
            card = self.dot_card if key == DOT_KEY else self._cards[key]
            self._scroll.verticalScrollBar().setValue(card.y() - 8)

    # ------------------------------------------------------------ drawing
    def clear(self) -> None:
        self.calculation = None

    def draw(self) -> None:
        trace, sel = self.trace, self.selection
        query, key = sel.query_index(trace.n_tokens), sel.key_index(trace.n_tokens)
        calc = head_calculation(trace, sel.layer, sel.head, query, key)
        self.calculation = calc
        self._update_combos(trace, calc)
        self.summary.setText(self._summary_text(trace, calc))
        # Filling ~16 tables and heatmaps is the costly part: a panel hidden behind another dock tab
        # skips it until it is shown (or exported), so typing only pays for what is on screen.
        self._cards_stale = True
        if self.isVisible():
            self._draw_cards()

    def _draw_cards(self) -> None:
        calc = self.calculation
        if calc is None or not self._cards_stale:
            return
        for number, step in enumerate(calc.steps, start=1):
            self._card(step.key).show_step(number, step)
        self._show_dot(calc.dot, self.trace)
        self._cards_stale = False

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        self._draw_cards()

    def _card(self, key: str) -> Card:
        """Cards are built once and reused: a refresh only changes their contents."""
        if key not in self._cards:
            card = Card()
            card.table.clicked.connect(lambda index, card=card: self._cell_clicked(card, index))
            self._cards[key] = card
            self._strip_layout.insertWidget(self._strip_layout.count() - 1, card)
            card.show()  # now, not on the next event loop turn: an export may follow at once
            if key == DOT_AFTER:  # the term-by-term expansion follows the scaled scores
                self._strip_layout.insertWidget(self._strip_layout.count() - 1, self.dot_card)
                self.dot_card.show()
        return self._cards[key]

    def _show_dot(self, dot: DotProduct, trace) -> None:
        card, n = self.dot_card, dot.terms.shape[0]
        card.title.setText(DOT_TITLE)
        card.formula.setText(f"score[{dot.query}, {dot.key}] = Σ_d q_rot[{dot.query}]_d × k_rot[{dot.key}]_d ÷ √{n}\n"
                             f"               = {format_value(dot.total)} ÷ {dot.scale:.4g} = {format_value(dot.score)}")
        card.note.setText(f"Query {dot.query} “{trace.label(dot.query)}” against key {dot.key} "
                          f"“{trace.label(dot.key)}”. The run's own score is {format_value(dot.trace_score)} "
                          f"(difference {abs(dot.score - dot.trace_score):.1e}).")
        card.elided.setVisible(False)
        values, rows, cols = dot_product_table(dot)
        card.model.set_window(values, range(len(rows)), range(len(cols)), rows, cols, (), (2,))
        strip = np.vstack([dot.q, dot.k, dot.terms])  # [3, Dh]
        # no ticks: the table shows every row and dim, and its columns name them
        card.heatmap.set_matrix(strip, True, (), (), (2,), (), f"rows q, k, q×k; {n} head dims")

    def _summary_text(self, trace, calc: HeadCalculation) -> str:
        cfg = trace.config
        source = "" if calc.from_weights else " (no weights in this trace: Q, K, V are the traced values)"
        return (f"Layer {calc.layer}, head {calc.head}: query {calc.query} “{trace.label(calc.query)}”, "
                f"key {calc.key} “{trace.label(calc.key)}”. {trace.n_tokens} tokens, D = {cfg.hidden_size}, "
                f"Dh = {cfg.head_dim}. Every matrix is recomputed from the one before and the model's weights, "
                f"as in the hand calculation; it matches the run to display precision{source}. "
                "Unlike the original Transformer (Vaswani et al., 2017), this model adds no positions to X: it rotates q and k (RoPE) "
                "before the dot product. Yellow: the query's row; blue: the key's column; hover a number "
                "for full precision, click one to select its tokens.")

    def _update_combos(self, trace, calc: HeadCalculation) -> None:
        labels = [f"{i} {elide(trace.label(i), 16)}" for i in range(trace.n_tokens)]
        items = {"layer": [str(l) for l in range(trace.num_layers)],
                 "head": [str(h) for h in range(trace.num_heads)],
                 "query": labels, "key": labels[: calc.query + 1],
                 "step": [label for label, _ in go_to_entries(calc.steps)]}
        current = {"layer": calc.layer, "head": calc.head, "query": calc.query, "key": calc.key}
        for name, combo in {**self._combos, "step": self.step_index}.items():
            with qt_signals_blocked(combo):
                if self._combo_items.get(name) != tuple(items[name]):  # rebuilding 256 items each keystroke is waste
                    combo.clear()
                    combo.addItems(items[name])
                    self._combo_items[name] = tuple(items[name])
                if name in current:
                    combo.setCurrentIndex(current[name])

    # ------------------------------------------------------------ export
    def figures(self) -> list[Figure]:
        calc = self.calculation
        if calc is None:
            return []
        self._draw_cards()
        self._lay_out_strip()
        self.overview.show_calculation(self._heading(calc), calc.steps)
        steps = [Figure(step_file_stem(i, step), self._cards[step.key], table=step.csv,
                        page_size=self._cards[step.key].page_size)
                 for i, step in enumerate(calc.steps)]
        return [Figure("step_by_step", self.overview, table=lambda: self._overview_csv(calc)), *steps,
                Figure("step_dot_product", self.dot_card, table=calc.dot.csv, page_size=self.dot_card.page_size)]

    def _heading(self, calc: HeadCalculation) -> str:
        trace = self.trace
        return (f"One attention head, step by step: layer {calc.layer}, head {calc.head}, query {calc.query} "
                f"“{trace.label(calc.query)}”, key {calc.key} “{trace.label(calc.key)}” ({trace.n_tokens} tokens)")

    def _lay_out_strip(self) -> None:
        """Lay the page of cards out now, at its full height, so that an export straight after a new
        trace renders every card at its size. A panel hidden in a dock tab gets no layout passes
        from the event loop (Qt defers them until shown), so this one is done by hand."""
        if not self.isVisible():  # the scroll area would size the page only when shown: do it now
            self.layout().invalidate()
            self.layout().activate()
            QCoreApplication.sendEvent(self._scroll, QResizeEvent(self._scroll.size(), self._scroll.size()))
        cards = (*self._cards.values(), self.dot_card)
        for card in cards:  # bottom up: activate() re-reads every nested layout's size hints
            card.layout().invalidate()
            card.layout().activate()
            card.updateGeometry()
        layout = self._strip.layout()
        layout.invalidate()
        width = max(self._scroll.viewport().width(), layout.minimumSize().width())
        height = layout.heightForWidth(width) if layout.hasHeightForWidth() else layout.sizeHint().height()
        self._strip.resize(width, max(height, layout.sizeHint().height()))
        layout.activate()
        for card in cards:  # top down: each card lays its table and heatmap out in its new rectangle
            card.layout().invalidate()
            card.layout().activate()

    @staticmethod
    def _overview_csv(calc: HeadCalculation) -> str:
        rows = [("file", "step", "formula", "rows", "columns", "shown")]
        rows += [(step_file_stem(i, s), s.title, s.formula, s.values.shape[0], s.values.shape[1], s.elided or "all")
                 for i, s in enumerate(calc.steps)]
        return csv_text(rows)
