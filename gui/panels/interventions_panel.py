"""Interventions: every head and expert switch in one panel, for every run the app makes.

The ablations hold for every panel at once (and for the sweeps and occlusion), so there is one
value of them, the controller's core.interventions.Interventions, with one zero/mean choice. This
panel edits it — a box per head, one per layer (all its heads), one per expert and layer — and so
does the attention grid (its corner boxes, and the same zero/mean setting beside it); both ask the
controller (sigSetInterventions), which re-runs the sentence, and both show the run in force, so a
switch made in one shows in the other. The other panels say what is in force (the banner).
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSizeF
from PySide6.QtWidgets import (QButtonGroup, QCheckBox, QGridLayout, QGroupBox, QHBoxLayout, QLabel, QPushButton,
                               QRadioButton, QVBoxLayout, QWidget)

from core.interventions import Interventions, Switches
from gui import figure_pages as pages
from gui.heatmap import Heatmap, cells_path
from gui.panels.base import Figure, Panel
from gui.qt_signals import qt_signals_blocked
from gui.theme import page_background

EXPERTS_NOTE = ("An expert switched off in a layer is never chosen there: the router takes its top-k among the "
                "remaining experts and renormalises their probabilities to sum 1.")
NO_EXPERTS_NOTE = ("This model has no experts: every layer has one dense MLP that every token goes through "
                   "(no router), so there is nothing to switch here; heads can still be switched off above.")
EXPERTS_TITLE, NO_EXPERTS_TITLE = "Experts (checked: on)", "Experts"
SWITCH_ON, SWITCH_OFF = (0, 114, 178, 255), (200, 200, 200, 255)   # Okabe–Ito blue; the masked cells' grey
MEAN_NOTE = "mean: a switched-off head outputs its mean output over this sentence's positions (later ones included)."


class InterventionsPanel(Panel):
    title = "Interventions"
    object_name = "interventions"
    figure_names = {"interventions_switches": ""}
    fields = ()   # the run's interventions and the config: no array of the trace
    empty_text = "Type a sentence: heads and experts switched off here apply to every run."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.head_boxes: dict[tuple[int, int], QCheckBox] = {}
        self.layer_boxes: dict[int, QCheckBox] = {}
        self.expert_boxes: dict[tuple[int, int], QCheckBox] = {}
        self._shape: tuple[int, int, int] | None = None
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.addLayout(self._build_mode_row())
        self.heads_box, self.experts_box = QGroupBox("Heads (checked: on)"), QGroupBox(EXPERTS_TITLE)
        self.heads_grid, self.experts_grid = QGridLayout(self.heads_box), QGridLayout(self.experts_box)
        layout.addWidget(self.heads_box)
        layout.addWidget(self.experts_box)
        self.experts_note = QLabel(EXPERTS_NOTE)
        self.experts_note.setWordWrap(True)
        layout.addWidget(self.experts_note)
        self.message = QLabel()
        self.message.setObjectName("interventions_message")
        self.message.setWordWrap(True)
        layout.addWidget(self.message)
        layout.addStretch(1)
        self.set_content(page)

    def _build_mode_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.addWidget(QLabel("A switched-off head outputs"))   # as the Attention panel says it
        self.zero_button, self.mean_button = QRadioButton("zero"), QRadioButton("its mean")
        self.zero_button.setChecked(True)
        self.zero_button.setToolTip("zero: an ablated head adds nothing to attn_out.")
        self.mean_button.setToolTip(MEAN_NOTE)
        self.mode_group = QButtonGroup(self)
        for button in (self.zero_button, self.mean_button):
            self.mode_group.addButton(button)
            row.addWidget(button)
        self.mode_group.buttonToggled.connect(lambda _button, checked: checked and self._emit())
        self.clear_button = QPushButton("Switch everything on")
        self.clear_button.clicked.connect(self.clear_all)
        row.addStretch(1)
        row.addWidget(self.clear_button)
        return row

    # ------------------------------------------------------------ building the boxes for a model's shape
    def _build_boxes(self, layers: int, heads: int, experts: int) -> None:
        for grid in (self.heads_grid, self.experts_grid):
            while grid.count():
                grid.takeAt(0).widget().deleteLater()
        self.head_boxes.clear(), self.layer_boxes.clear(), self.expert_boxes.clear()
        for l in range(layers):
            layer_box = QCheckBox(f"layer {l}")
            layer_box.toggled.connect(lambda on, l=l: self._set_layer(l, on))
            self.heads_grid.addWidget(layer_box, l, 0)
            self.layer_boxes[l] = layer_box
            for h in range(heads):
                self.head_boxes[l, h] = self._box(f"H{h}", self.heads_grid, l, h + 1)   # named as in the head grid
            if experts:
                self.experts_grid.addWidget(QLabel(f"layer {l}"), l, 0)
            for e in range(experts):
                self.expert_boxes[l, e] = self._box(f"E{e}", self.experts_grid, l, e + 1)
        if not experts:   # a dense model: say so instead of listing layers with nothing to switch
            self.experts_grid.addWidget(QLabel(NO_EXPERTS_NOTE, wordWrap=True), 0, 0)
        self.experts_box.setTitle(EXPERTS_TITLE if experts else NO_EXPERTS_TITLE)
        self.experts_note.setVisible(bool(experts))
        self._shape = (layers, heads, experts)

    def _box(self, text: str, grid: QGridLayout, row: int, col: int) -> QCheckBox:
        box = QCheckBox(text)
        box.toggled.connect(lambda _on: self._emit())
        grid.addWidget(box, row, col)
        return box

    # ------------------------------------------------------------ what is switched off
    def switches(self) -> Switches:
        """What the boxes say (core.interventions.Switches: the figure's matrix and CSV)."""
        L, H, E = self._shape
        return Switches(np.array([[self.head_boxes[l, h].isChecked() for h in range(H)] for l in range(L)], bool),
                        np.array([[self.expert_boxes[l, e].isChecked() for e in range(E)] for l in range(L)], bool),
                        "mean" if self.mean_button.isChecked() else "zero")

    def interventions(self) -> Interventions:
        return self.switches().interventions()

    def _set_layer(self, layer: int, on: bool) -> None:
        for (l, h), box in self.head_boxes.items():
            if l == layer:
                with qt_signals_blocked(box):   # one re-run for the whole layer, not one per head
                    box.setChecked(on)
        self._emit()

    def clear_all(self) -> None:
        for box in (*self.head_boxes.values(), *self.expert_boxes.values(), *self.layer_boxes.values()):
            with qt_signals_blocked(box):
                box.setChecked(True)
        self._emit()

    def _emit(self) -> None:
        if self.trace is None or self._shape is None:
            return
        interventions = self.interventions()
        try:
            interventions.filled(self.trace.config, 1)
        except ValueError as exc:   # e.g. too few experts left on for the router's top-k
            self.message.setText(f"not applied: {exc}")
            return
        self.message.setText(interventions.describe() or "nothing switched off")
        self.sigSetInterventions.emit(interventions)

    # ------------------------------------------------------------ drawing
    def draw(self) -> None:
        trace = self.trace
        cfg = trace.config
        shape = (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_local_experts)
        if shape != self._shape:
            self._build_boxes(*shape)
        self._show_in_force(trace.interventions)

    def _show_in_force(self, interventions) -> None:
        """The boxes follow the run shown (the ablations the controller actually applied)."""
        switches = Switches.in_force(interventions, self.trace.config)
        with qt_signals_blocked(self.mode_group):
            (self.mean_button if switches.ablate_mode == "mean" else self.zero_button).setChecked(True)
        boxes = [(self.head_boxes, switches.heads_on), (self.expert_boxes, switches.experts_on),
                 (self.layer_boxes, switches.heads_on.any(axis=1))]
        for by_site, on in boxes:
            for site, box in by_site.items():
                with qt_signals_blocked(box):
                    box.setChecked(bool(on[site]))

    def figures(self) -> list[Figure]:
        if self._shape is None:
            return []
        view, matrix = self._switch_matrix()
        rows, cols = matrix.image.image.shape[:2]
        cell = QSizeF(pages.cell_size(cols), pages.cell_size(cols))
        return [Figure("interventions_switches", view, table=self.switches().csv,
                       page_size=lambda: pages.cells_page(view, matrix.vb, rows, cols, cell))]

    def _switch_matrix(self) -> tuple[pg.GraphicsLayoutWidget, Heatmap]:
        """The switches as a figure: a layer × (heads, then experts) matrix, blue on, grey off, the
        ablate mode in its title; drawn on demand, never shown in the dock."""
        if getattr(self, "_switch_view", None) is None:
            self._switch_view = pg.GraphicsLayoutWidget()
            self._switch_view.setBackground(page_background())
            self._switch_plot = Heatmap("head (h) · expert (e) →", "layer ↓")
            self._switch_view.addItem(self._switch_plot)
            self._switch_cells = self._switch_plot.add_outline(page_background(), 2)   # each switch its own square
        L, H, E = self._shape
        switches = self.switches()
        rgba = np.where(switches.matrix()[..., None], np.array(SWITCH_ON, np.uint8), np.array(SWITCH_OFF, np.uint8))
        self._switch_plot.set_rgba(rgba)
        self._switch_cells.setPath(cells_path((r, c) for r in range(L) for c in range(H + E)))
        self._switch_plot.set_row_labels([f"L{l}" for l in range(L)])
        self._switch_plot.set_col_labels([f"h{h}" for h in range(H)] + [f"e{e}" for e in range(E)])
        mode = "their mean" if switches.ablate_mode == "mean" else "zero"
        self._switch_plot.setTitle(f"Switches in force — blue: on, grey: off; switched-off heads output {mode}",
                                   size="9pt")
        return self._switch_view, self._switch_plot
